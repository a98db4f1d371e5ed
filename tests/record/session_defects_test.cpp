// Issue 23 §3: pt-record's defects, each with a test against the kernel model that failed
// before its fix (the real-run tests are in tests/e2e/record).
#include <doctest/doctest.h>

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "model_session.h"
#include "pt_stream.h"

namespace ptscope::record::testing {
namespace {


TEST_CASE("defect 2: an unprivileged user's rings fit the locked-page budget (perf_mmap)") {
  // perf_event_mlock_kb 516 × 2 CPUs = 258 pages per user, then ulimit -l 64 KiB = 16 pages.
  ModelHost host;
  host.rlimit_memlock = 64 * 1024;
  KernelModel model(host);
  ModelRun run(model, /*root=*/false);
  run.facts.rlimit_memlock = host.rlimit_memlock;
  run.session.argv = {"/bin/sleep", "30"};
  int step = 0, pid = -1;
  model.on_poll = [&](KernelModel& m) {
    if (step == 0) {
      pid = run.TargetPid();
      m.SchedIn(pid, pid, 0);
      m.WritePt(pid, MakePtStream(5000));
      m.SchedOut(pid);
    } else if (step == 1) {
      ::kill(::getpid(), SIGINT);
    }
    ++step;
  };
  auto summary = run.Run();
  KillTarget(pid);
  REQUIRE_MESSAGE(summary, summary.error().message);
  std::vector<format::PtDataChunk> pieces = ReadComplete(run.session.output).pt_data;
  REQUIRE(pieces.size() == 1);
  CHECK(pieces[0].data == MakePtStream(5000));
}

TEST_CASE("defect 3: a kernel before 5.12 refuses build_id in the attr; the recording goes on "
          "with build ids from the files (perf_copy_attr)") {
  ModelHost host;
  host.kernel_major = 5;
  host.kernel_minor = 11;
  KernelModel model(host);
  ModelRun run(model);
  run.session.argv = {"/bin/sleep", "30"};
  run.source_options.sideband_only = true;
  run.session.snapshot = false;
  const std::string sleep = std::filesystem::canonical("/bin/sleep").string();
  int step = 0, pid = -1;
  model.on_poll = [&](KernelModel& m) {
    if (step == 0) {
      pid = run.TargetPid();
      m.SchedIn(pid, pid, 0);
      perf::MmapRecord mapping;
      mapping.pid = mapping.tid = static_cast<uint32_t>(pid);
      mapping.addr = 0x7f0000000000;
      mapping.len = 0x1000;
      mapping.maj = 8;
      mapping.ino = 1234;
      mapping.build_id = {1, 2, 3, 4};
      mapping.prot = 5;
      mapping.flags = 2;
      mapping.filename = "/usr/lib/model/libnew.so";
      m.Mmap2(pid, pid, mapping);
    } else if (step == 1) {
      ::kill(::getpid(), SIGINT);
    }
    ++step;
  };
  auto summary = run.Run();
  KillTarget(pid);
  REQUIRE_MESSAGE(summary, summary.error().message);
  const bool said = std::any_of(run.notes.begin(), run.notes.end(), [](const std::string& n) {
    return n == "this kernel (5.11) does not put build ids in MMAP2 records (Linux 5.12 and later "
                "do): build ids are read from the mapped files while recording";
  });
  CHECK(said);
  format::Archive archive = ReadComplete(run.session.output);
  // The attr the kernel accepted, without build_id, is what the archive describes.
  REQUIRE(archive.sideband_attrs.size() == 1);
  perf_event_attr used{};
  std::memcpy(&used, archive.sideband_attrs[0].raw_attr.data(), sizeof used);
  CHECK(static_cast<int>(used.build_id) == 0);
  CHECK(static_cast<int>(used.mmap2) == 1);
  // The kernel's MMAP2 has the inode form; the target's own binary, synthesized from /proc, and
  // its Module chunk have the build id read from the file.
  bool kernel_mmap = false;
  for (const format::SidebandChunk& chunk : archive.sideband) {
    perf::RecordIterator it(chunk.records, SidebandLayout());
    while (auto next = it.Next()) {
      REQUIRE(*next);
      const auto* mmap = std::get_if<perf::MmapRecord>(&next->value().body);
      if (mmap == nullptr || mmap->filename != "/usr/lib/model/libnew.so") continue;
      kernel_mmap = true;
      CHECK(mmap->build_id.empty());
      CHECK(mmap->ino == 1234);
    }
  }
  CHECK(kernel_mmap);
  bool module = false;
  for (const format::ModuleChunk& m : archive.modules) {
    if (m.path == sleep) module = !m.build_id.empty();
  }
  CHECK(module);
}

// A process that sleeps until killed (for attach mode).
int SpawnSleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

TEST_CASE("defect 4: -p A,B labels each thread's PT with its own process") {
  KernelModel model;
  ModelRun run(model);
  const int a = SpawnSleeper(), b = SpawnSleeper();
  run.session.mode = SourceSettings::Mode::kAttach;
  run.session.pids = {a, b};
  int step = 0;
  model.on_poll = [&](KernelModel& m) {
    if (step == 0) {
      m.SchedIn(a, a, 0);
      m.SchedIn(b, b, 1);
      m.WritePt(a, MakePtStream(1000, 1));
      m.WritePt(b, MakePtStream(1000, 50));
      m.SchedOut(a);
      m.SchedOut(b);
    } else if (step == 1) {
      ::kill(::getpid(), SIGINT);
    }
    ++step;
  };
  auto summary = run.Run();
  KillTarget(a);
  KillTarget(b);
  REQUIRE_MESSAGE(summary, summary.error().message);
  std::vector<format::PtDataChunk> pieces = ReadComplete(run.session.output).pt_data;
  REQUIRE(pieces.size() == 2);
  for (const format::PtDataChunk& piece : pieces) {
    INFO("tid " << piece.tid);
    CHECK(piece.pid == piece.tid);  // each sleeper is a single-threaded process
    CHECK(piece.data == MakePtStream(1000, piece.tid == static_cast<uint32_t>(a) ? 1 : 50));
  }
}

// A process with `threads` threads besides its main one, all sleeping until it is killed.
int SpawnThreaded(int threads) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int i = 0; i < threads; ++i) {
      pthread_t thread;
      ::pthread_create(&thread, nullptr, [](void*) -> void* {
        for (;;) ::pause();
      }, nullptr);
    }
    char ok = 1;
    (void)!::write(ready[1], &ok, 1);
    for (;;) ::pause();
  }
  char ok = 0;
  (void)!::read(ready[0], &ok, 1);
  ::close(ready[0]);
  ::close(ready[1]);
  return pid;
}

TEST_CASE("defect 8: a thread that exits between listing and perf_event_open is skipped "
          "(find_lively_task_by_vpid: ESRCH)") {
  const int pid = SpawnThreaded(2);
  std::vector<int> tids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task"))
    tids.push_back(std::stoi(entry.path().filename()));
  std::sort(tids.begin(), tids.end());
  REQUIRE(tids.size() == 3);
  const int gone = tids.back();
  ModelHost host;
  host.task_alive = [gone](int tid) { return tid != gone && ::kill(tid, 0) == 0; };
  KernelModel model(host);
  ModelRun run(model);
  run.session.mode = SourceSettings::Mode::kAttach;
  run.session.pids = {pid};
  int step = 0;
  model.on_poll = [&](KernelModel& m) {
    if (step == 0) {
      m.SchedIn(pid, tids[1], 0);
      m.WritePt(tids[1], MakePtStream(800));
      m.SchedOut(tids[1]);
    } else if (step == 1) {
      ::kill(::getpid(), SIGINT);
    }
    ++step;
  };
  auto summary = run.Run();
  KillTarget(pid);
  REQUIRE_MESSAGE(summary, summary.error().message);
  const bool said = std::any_of(run.notes.begin(), run.notes.end(), [&](const std::string& n) {
    return n == "thread " + std::to_string(gone) + " of process " + std::to_string(pid) +
                    " exited before it could be traced";
  });
  CHECK(said);
  std::vector<format::PtDataChunk> pieces = ReadComplete(run.session.output).pt_data;
  REQUIRE(pieces.size() == 1);
  CHECK(pieces[0].tid == static_cast<uint32_t>(tids[1]));
}

TEST_CASE("defect 8: many threads × CPUs raise RLIMIT_NOFILE to its hard limit, as perf does "
          "(get_unused_fd_flags: EMFILE)") {
  const int pid = SpawnThreaded(40);  // 41 threads: 41 × 2 sideband + 41 PT events
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  rlimit low = old;
  low.rlim_cur = 64;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  KernelModel model;
  ModelRun run(model);
  run.session.mode = SourceSettings::Mode::kAttach;
  run.session.pids = {pid};
  run.source_options.aux_bytes = 4 * 4096;
  model.on_poll = [&](KernelModel&) { ::kill(::getpid(), SIGINT); };
  auto summary = run.Run();
  rlimit after{};
  ::getrlimit(RLIMIT_NOFILE, &after);
  ::setrlimit(RLIMIT_NOFILE, &old);
  KillTarget(pid);
  REQUIRE_MESSAGE(summary, summary.error().message);
  CHECK(after.rlim_cur == old.rlim_max);
  // Past the hard limit: a sentence with the numbers, not a bare EMFILE.
  rlimit tight = old;
  tight.rlim_cur = tight.rlim_max = 64;
  const int pid2 = SpawnThreaded(40);
  KernelModel model2;
  ModelRun run2(model2);
  run2.session.mode = SourceSettings::Mode::kAttach;
  run2.session.pids = {pid2};
  run2.source_options.aux_bytes = 4 * 4096;
  // Lowering the hard limit cannot be undone without CAP_SYS_RESOURCE: do it in a child.
  const pid_t child = ::fork();
  if (child == 0) {
    ::setrlimit(RLIMIT_NOFILE, &tight);
    auto failed = run2.Run();
    const bool right =
        !failed && failed.error().message.find("needs about 123 descriptors for 41 threads on 2 "
                                               "CPUs, and ulimit -n allows 64 (hard limit 64)") !=
                       std::string::npos;
    if (!right) std::fprintf(stderr, "%s\n", failed ? "succeeded" : failed.error().message.c_str());
    ::_exit(right ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  KillTarget(pid2);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

// Every record of the archive's sideband, in file order.
std::vector<perf::Record> SidebandRecords(const format::Archive& archive) {
  std::vector<perf::Record> records;
  for (const format::SidebandChunk& chunk : archive.sideband) {
    perf::RecordIterator it(chunk.records, SidebandLayout());
    while (auto next = it.Next()) {
      REQUIRE(*next);
      records.push_back(next->value());
    }
  }
  return records;
}

TEST_CASE("defect 5: a snapshot copies only what is new since the last one, also once the ring "
          "has wrapped (perf's intel_pt_find_snapshot)") {
  KernelModel model;
  ModelRun run(model);
  run.session.argv = {"/bin/sleep", "30"};
  run.source_options.aux_bytes = 16 * 4096;  // 64 KiB ring
  const std::vector<uint8_t> stream = MakePtStream(150000);
  int step = 0, pid = -1;
  auto trace = [&](KernelModel& m, size_t from, size_t to) {
    m.SchedIn(pid, pid, 0);
    m.WritePt(pid, std::span(stream).subspan(from, to - from));
    m.SchedOut(pid);
  };
  model.on_poll = [&](KernelModel& m) {
    switch (step++) {
      case 0: pid = run.TargetPid(); trace(m, 0, 100000); break;  // wraps the 64 KiB ring
      case 1: ::kill(::getpid(), SIGUSR2); break;                  // snapshot 0
      case 3: ::kill(::getpid(), SIGUSR2); break;                  // snapshot 1: nothing new
      case 5: trace(m, 100000, 110000); break;
      case 6: ::kill(::getpid(), SIGUSR2); break;                  // snapshot 2: 10000 new bytes
      case 8: trace(m, 110000, 150000); break;                     // around the ring again
      case 9: ::kill(::getpid(), SIGINT); break;                   // snapshot 3, stop
      default: break;
    }
  };
  auto summary = run.Run();
  KillTarget(pid);
  REQUIRE_MESSAGE(summary, summary.error().message);
  CHECK(summary->snapshots == 4);
  std::vector<format::PtDataChunk> pieces = ReadComplete(run.session.output).pt_data;
  REQUIRE(pieces.size() == 3);
  // Snapshot 0: the ring (the newest 64 KiB), data before it overwritten.
  CHECK(pieces[0].snapshot_index == 0);
  CHECK((pieces[0].flags & format::kPtOverwritten) != 0);
  CHECK(pieces[0].data == std::vector<uint8_t>(stream.begin() + 100000 - 65536, stream.begin() + 100000));
  // Snapshot 1 copied nothing. Snapshot 2: exactly the 10000 new bytes, continuing the stream.
  CHECK(pieces[1].snapshot_index == 2);
  CHECK((pieces[1].flags & format::kPtOverwritten) == 0);
  CHECK(pieces[1].data == std::vector<uint8_t>(stream.begin() + 100000, stream.begin() + 110000));
  CHECK(pieces[1].stream_offset == pieces[0].stream_offset + pieces[0].data.size());
  // Snapshot 3: 40000 new bytes, less than a ring: new only, nothing lost.
  CHECK(pieces[2].snapshot_index == 3);
  CHECK((pieces[2].flags & format::kPtOverwritten) == 0);
  CHECK(pieces[2].data == std::vector<uint8_t>(stream.begin() + 110000, stream.end()));
}

TEST_CASE("defect 10: the first wrap is seen in the last 4 KiB of the ring, as perf looks "
          "(intel_pt_first_wrap): PAD bytes are zero") {
  KernelModel model;
  ModelRun run(model);
  run.session.argv = {"/bin/sleep", "30"};
  run.source_options.aux_bytes = 16 * 4096;
  // The ring's last 1000 bytes are PAD packets (0x00) when the hardware wraps.
  std::vector<uint8_t> stream = MakePtStream(65536 - 1000);
  stream.resize(65536, 0x00);
  const std::vector<uint8_t> after = MakePtStream(3000, 77);
  stream.insert(stream.end(), after.begin(), after.end());
  int step = 0, pid = -1;
  model.on_poll = [&](KernelModel& m) {
    if (step == 0) {
      pid = run.TargetPid();
      m.SchedIn(pid, pid, 0);
      m.WritePt(pid, stream);
      m.SchedOut(pid);
    } else if (step == 1) {
      ::kill(::getpid(), SIGINT);
    }
    ++step;
  };
  auto summary = run.Run();
  KillTarget(pid);
  REQUIRE_MESSAGE(summary, summary.error().message);
  std::vector<format::PtDataChunk> pieces = ReadComplete(run.session.output).pt_data;
  REQUIRE(pieces.size() == 1);
  CHECK((pieces[0].flags & format::kPtOverwritten) != 0);
  CHECK(pieces[0].data == std::vector<uint8_t>(stream.end() - 65536, stream.end()));
}

TEST_CASE("defect 6: full mode re-enables the event after a TRUNCATED buffer was drained, and "
          "the loss is a gap (pt_handle_status, perf_aux_output_end)") {
  KernelModel model;
  ModelRun run(model);
  run.session.argv = {"/bin/sleep", "30"};
  run.session.snapshot = false;
  run.source_options.aux_bytes = 4 * 4096;
  const std::vector<uint8_t> stream = MakePtStream(40000);
  int step = 0, pid = -1;
  model.on_poll = [&](KernelModel& m) {
    switch (step++) {
      case 0:
        pid = run.TargetPid();
        m.SchedIn(pid, pid, 0);
        m.WritePt(pid, std::span(stream).first(20000));  // does not fit: TRUNCATED, disabled
        break;
      case 2: m.WritePt(pid, std::span(stream).subspan(20000, 10000)); break;
      case 4: m.SchedOut(pid); break;
      case 5: ::kill(::getpid(), SIGINT); break;
      default: break;
    }
  };
  auto summary = run.Run();
  KillTarget(pid);
  REQUIRE_MESSAGE(summary, summary.error().message);
  std::vector<format::PtDataChunk> pieces = ReadComplete(run.session.output).pt_data;
  REQUIRE(!pieces.empty());
  std::vector<uint8_t> before, later;
  bool gap = false;
  for (const format::PtDataChunk& piece : pieces) {
    (gap ? later : before).insert((gap ? later : before).end(), piece.data.begin(), piece.data.end());
    if (piece.flags & format::kPtTruncated) gap = true;
  }
  CHECK(gap);
  CHECK(before == std::vector<uint8_t>(stream.begin(), stream.begin() + 4 * 4096 - 1));
  CHECK(later == std::vector<uint8_t>(stream.begin() + 20000, stream.begin() + 30000));
}

TEST_CASE("defect 7: in snapshot mode the PT event's data ring is drained all along, so no AUX "
          "or ITRACE_START record is lost (perf_output_begin: rb->lost)") {
  KernelModel model;
  ModelRun run(model);
  run.session.argv = {"/bin/sleep", "30"};
  const std::vector<uint8_t> bytes = MakePtStream(64);
  int step = 0, pid = -1;
  model.on_poll = [&](KernelModel& m) {
    if (step == 0) pid = run.TargetPid();
    if (step < 20) {
      for (int i = 0; i < 100; ++i) {  // 2000 sched-outs, one AUX record each
        m.SchedIn(pid, pid, i % 2);
        m.WritePt(pid, bytes);
        m.SchedOut(pid);
      }
    } else if (step == 20) {
      ::kill(::getpid(), SIGINT);
    }
    ++step;
  };
  auto summary = run.Run();
  KillTarget(pid);
  REQUIRE_MESSAGE(summary, summary.error().message);
  int aux = 0, lost = 0, itrace = 0;
  for (const perf::Record& record : SidebandRecords(ReadComplete(run.session.output))) {
    aux += record.type == perf::kRecordAux;
    lost += record.type == perf::kRecordLost;
    itrace += record.type == perf::kRecordItraceStart;
  }
  CHECK(lost == 0);
  CHECK(itrace == 1);
  CHECK(aux == 2000);
}

TEST_CASE("defect 9: a file filter with -a is refused with the reason, before anything is "
          "opened, not by the kernel's EOPNOTSUPP (perf_event_parse_addr_filter)") {
  KernelModel model;
  ModelRun run(model);
  run.session.mode = SourceSettings::Mode::kAllCpus;
  run.source_options.filter = "filter 0x1000/0x100 @ /bin/true";
  auto summary = run.Run();
  REQUIRE(!summary);
  CHECK(summary.error().message ==
        "--filter with -a: the kernel takes address filters in files only for a program or -p "
        "PID, not for every CPU (they would mean different addresses in each process)");
  CHECK(!std::filesystem::exists(run.session.output));
}

}  // namespace
}  // namespace ptscope::record::testing
