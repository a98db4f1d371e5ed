// pt-record's real session (RunSession + KernelPtSource) against the kernel model
// (kernel_model.h): what reaches the archive when the kernel behaves as its source says.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include "model_session.h"
#include "pt_stream.h"

namespace ptscope::record::testing {
namespace {

TEST_CASE("model: a snapshot holds what the hardware wrote, from where the kernel's aux_head says") {
  KernelModel model;
  ModelRun run(model);
  run.session.argv = {"/bin/sleep", "30"};
  const std::vector<uint8_t> stream = MakePtStream(3000);
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
  REQUIRE(summary);
  CHECK(summary->reason == "signal");
  std::vector<format::PtDataChunk> pieces = ReadComplete(run.session.output).pt_data;
  REQUIRE(pieces.size() == 1);
  CHECK(pieces[0].data == stream);
  CHECK(pieces[0].tid == static_cast<uint32_t>(pid));
  CHECK(pieces[0].snapshot_index == 0);
}

TEST_CASE("model: full mode streams every byte as the kernel commits it") {
  KernelModel model;
  ModelRun run(model);
  run.session.argv = {"/bin/sleep", "30"};
  run.session.snapshot = false;
  run.source_options.aux_bytes = 16 * 4096;
  const std::vector<uint8_t> stream = MakePtStream(40000);
  int step = 0, pid = -1;
  model.on_poll = [&](KernelModel& m) {
    if (step == 0) {
      pid = run.TargetPid();
      m.SchedIn(pid, pid, 1);
      m.WritePt(pid, std::span(stream).first(20000));
    } else if (step == 1) {
      m.WritePt(pid, std::span(stream).subspan(20000));
      m.SchedOut(pid);
    } else if (step == 2) {
      ::kill(::getpid(), SIGTERM);
    }
    ++step;
  };
  auto summary = run.Run();
  KillTarget(pid);
  REQUIRE(summary);
  std::vector<uint8_t> joined;
  uint64_t expected_offset = 0;
  for (const format::PtDataChunk& piece : ReadComplete(run.session.output).pt_data) {
    CHECK(piece.stream_offset == expected_offset);
    CHECK(piece.flags == 0);
    joined.insert(joined.end(), piece.data.begin(), piece.data.end());
    expected_offset += piece.data.size();
  }
  CHECK(joined == stream);
}

TEST_CASE("issue 24: what maps the code is written before the PT that needs it, so a cut "
          "archive keeps the sideband of every PT chunk it holds") {
  KernelModel model;
  ModelRun run(model);
  run.session.argv = {"/bin/sleep", "30"};
  int step = 0, pid = -1;
  model.on_poll = [&](KernelModel& m) {
    if (step == 0) {
      pid = run.TargetPid();
      m.SchedIn(pid, pid, 0);
      perf::MmapRecord mapping;  // a library the target maps just before running it
      mapping.pid = mapping.tid = static_cast<uint32_t>(pid);
      mapping.addr = 0x7f0000000000;
      mapping.len = 0x2000;
      mapping.prot = 5;
      mapping.flags = 2;
      mapping.filename = "/usr/lib/model/late.so";
      m.Mmap2(pid, pid, mapping);
      m.WritePt(pid, MakePtStream(2000));
      m.SchedOut(pid);
      ::kill(::getpid(), SIGINT);  // the snapshot comes before the loop drains the rings
    }
    ++step;
  };
  auto summary = run.Run();
  KillTarget(pid);
  REQUIRE_MESSAGE(summary, summary.error().message);
  // Walk the file in order: the MMAP2 must come before the first PT chunk.
  auto reader = format::ArchiveReader::Open(run.session.output);
  REQUIRE(reader);
  bool mapped = false, pt_seen = false;
  while (auto chunk = (*reader)->Next()) {
    if (std::holds_alternative<format::PtDataChunk>(*chunk)) {
      pt_seen = true;
      CHECK(mapped);
    } else if (const auto* sideband = std::get_if<format::SidebandChunk>(&*chunk)) {
      perf::RecordIterator it(sideband->records, SidebandLayout());
      while (auto next = it.Next()) {
        REQUIRE(*next);
        const auto* mmap = std::get_if<perf::MmapRecord>(&next->value().body);
        if (mmap != nullptr && mmap->filename == "/usr/lib/model/late.so") mapped = true;
      }
    }
  }
  CHECK(pt_seen);
  CHECK(mapped);
}

}  // namespace
}  // namespace ptscope::record::testing
