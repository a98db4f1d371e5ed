// SidebandTimeline: records of every sideband chunk taken in time order (a stable order: at one
// time, as the file has them) whatever the order of the chunks, for the schedule of each CPU and
// for names and address spaces alike.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "capture/sideband_timeline.h"
#include "ptscope/format.h"
#include "ptscope/perf_records.h"
#include "ptscope/perf_data.h"
#include "../support/perf_rounds.h"
#include "../support/sideband_records.h"
#include "../support/temp_dir.h"

namespace ptscope::decode {
namespace {

void Add(std::vector<uint8_t>* out, uint32_t type, uint16_t misc, perf::RecordBody body,
         uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu = 0) {
  const std::vector<uint8_t> bytes =
      ptscope::testing::SidebandRecord(type, misc, std::move(body), pid, tid, time, cpu);
  out->insert(out->end(), bytes.begin(), bytes.end());
}

// perf's pair for a CPU-wide switch on `cpu` at `time`: out-record of prev, in-record of next.
void Switch(std::vector<uint8_t>* out, uint32_t cpu, uint64_t time, uint32_t prev, uint32_t next) {
  const uint32_t prev_pid = prev == 0 ? 0 : 100, next_pid = next == 0 ? 0 : 100;
  Add(out, perf::kRecordSwitchCpuWide, perf::kMiscSwitchOut,
      perf::SwitchRecord{true, false, true, next_pid, next}, prev_pid, prev, time, cpu);
  Add(out, perf::kRecordSwitchCpuWide, 0, perf::SwitchRecord{false, false, true, prev_pid, prev},
      next_pid, next, time, cpu);
}

format::Archive TwoChunks(const std::vector<uint8_t>& first, const std::vector<uint8_t>& second) {
  format::Archive archive;
  format::SidebandAttrChunk attr;
  attr.attr_id = 1;
  attr.sample_type = ptscope::testing::kSidebandSampleType;
  archive.sideband_attrs.push_back(attr);
  for (const std::vector<uint8_t>* records : {&first, &second}) {
    format::SidebandChunk chunk;
    chunk.attr_id = 1;
    chunk.records = *records;
    archive.sideband.push_back(chunk);
  }
  return archive;
}

bool Is(ThreadKey key, uint32_t pid, uint32_t tid) { return key.pid == pid && key.tid == tid; }

TEST_CASE("records of later chunks that are earlier in time come first; at one time, file order") {
  // The file's first chunk holds the later records: the fork at 20 (which copies the name the
  // COMM at 10 gives), CPU 0's switches at 30 and 60, and CPU 1's two switch-ins at 40 (the
  // second, thread 101, is the one running from 40 on).
  std::vector<uint8_t> late, early;
  Add(&late, perf::kRecordFork, 0, perf::TaskRecord{100, 100, 101, 100, 20, false}, 100, 101, 20);
  Switch(&late, 0, 30, 100, 101);
  Switch(&late, 1, 40, 0, 100);
  Switch(&late, 1, 40, 100, 101);
  Switch(&late, 0, 60, 101, 0);
  Add(&early, perf::kRecordComm, perf::kMiscCommExec, perf::CommRecord{100, 100, "prog", true},
      100, 100, 10);
  Add(&early, perf::kRecordItraceStart, 0, perf::ItraceStartRecord{100, 100}, 100, 100, 5, 0);
  const SidebandTimeline timeline = SidebandTimeline::Build(TwoChunks(late, early));

  CHECK(timeline.notes().empty());
  CHECK(timeline.records() == 11);
  CHECK(timeline.ThreadName(100) == "prog");
  CHECK(timeline.ThreadName(101) == "prog");  // the fork came after the COMM, in time
  CHECK(timeline.PidOf(101) == 100);

  uint64_t since = 99;
  CHECK(Is(timeline.ThreadOnCpu(0, 4, &since), 0, 0));
  CHECK(since == 0);
  CHECK(Is(timeline.ThreadOnCpu(0, 5, &since), 100, 100));
  CHECK(since == 5);
  CHECK(Is(timeline.ThreadOnCpu(0, 29), 100, 100));
  CHECK(Is(timeline.ThreadOnCpu(0, 30, &since), 100, 101));  // out-record, then in-record
  CHECK(since == 30);
  CHECK(Is(timeline.ThreadOnCpu(0, 59), 100, 101));
  CHECK(Is(timeline.ThreadOnCpu(0, 60), 0, 0));  // the idle task
  CHECK(Is(timeline.ThreadOnCpu(1, 39), 0, 0));
  CHECK(Is(timeline.ThreadOnCpu(1, 40, &since), 100, 101));
  CHECK(since == 40);
  CHECK(Is(timeline.ThreadOnCpu(2, 40), 0, 0));  // a CPU the sideband never names

  const std::vector<ThreadKey> threads = timeline.ScheduledThreads();
  REQUIRE(threads.size() == 2);
  CHECK(Is(threads[0], 100, 100));
  CHECK(Is(threads[1], 100, 101));
  CHECK(timeline.ScheduledPids() == std::vector<uint32_t>{100});
}

// Read without its sideband bytes and held only up to one run, the timeline reads its chunks
// again for the schedule, with the same answers as with every record in memory; a chunk whose
// last record is malformed gives the runs before it, as when it was first read; a file changed,
// cut or gone since
// answers "none known" inside its chunks and counts them.
TEST_CASE("the schedule read again from the file: the same answers; a malformed tail as before") {
  const ptscope::testing::TempDir dir("ptscope-timeline");
  const std::string path = dir / "switches.ptar";
  {
    auto writer = format::ArchiveWriter::Create(path);
    REQUIRE(writer);
    format::SidebandAttrChunk attr;
    attr.attr_id = 1;
    attr.sample_type = ptscope::testing::kSidebandSampleType;
    attr.sample_id_all = true;
    REQUIRE((*writer)->Write(attr));
    for (uint32_t c = 0; c < 3; ++c) {  // CPU 0, times 100c to 100c+40: thread 10c+i from 100c+10i
      std::vector<uint8_t> records;
      for (uint32_t i = 0; i < 5; ++i) {
        Switch(&records, 0, 100 * c + 10 * i, 10 * c + i, 10 * c + i + 1);
      }
      if (c == 1) records.insert(records.end(), {1, 0, 0, 0, 0, 0, 4, 0});  // size 4: malformed
      REQUIRE((*writer)->Write(format::SidebandChunk{1, -1, records}));
    }
    REQUIRE((*writer)->Close());
  }
  auto whole = format::ReadArchive(path);
  auto light = format::ReadArchive(path, format::ReadOptions{.keep_sideband_bytes = false});
  REQUIRE(whole);
  REQUIRE(light);
  const SidebandTimeline held = SidebandTimeline::Build(*whole, 1);
  const SidebandTimeline read_again = SidebandTimeline::Build(*light, 1);
  CHECK(!held.schedule_streamed());  // its records are in memory anyway
  CHECK(read_again.schedule_streamed());
  REQUIRE(held.notes().size() == 1);  // chunk 1's malformed tail
  CHECK(read_again.notes() == held.notes());
  for (uint64_t time = 0; time < 260; ++time) {
    uint64_t since_held = 1, since_again = 2;
    CAPTURE(time);
    CHECK(held.ThreadOnCpu(0, time, &since_held) == read_again.ThreadOnCpu(0, time, &since_again));
    CHECK(since_held == since_again);
  }
  CHECK(Is(read_again.ThreadOnCpu(0, 125), 100, 13));  // inside chunk 1: switched in at 120
  CHECK(read_again.unread_chunks() == 0);

  // A copy changed after Build: a byte of chunk 2's payload flipped (its checksum fails), then the
  // file cut inside chunk 1: each look-up inside a damaged chunk answers none known, and counts it.
  {
    const std::string copy = path + ".copy";
    REQUIRE(std::system(("cp '" + path + "' '" + copy + "'").c_str()) == 0);
    auto light_copy = format::ReadArchive(copy, format::ReadOptions{.keep_sideband_bytes = false});
    REQUIRE(light_copy);
    const SidebandTimeline flipped = SidebandTimeline::Build(*light_copy, 1);
    const SidebandTimeline cut = SidebandTimeline::Build(*light_copy, 1);
    std::FILE* f = std::fopen(copy.c_str(), "r+b");
    REQUIRE(f != nullptr);
    REQUIRE(std::fseek(f, static_cast<long>(light->sideband_offsets[2] + 64), SEEK_SET) == 0);
    const int byte = std::fgetc(f);
    REQUIRE(std::fseek(f, static_cast<long>(light->sideband_offsets[2] + 64), SEEK_SET) == 0);
    REQUIRE(std::fputc(byte ^ 0xff, f) != EOF);
    std::fclose(f);
    CHECK(Is(flipped.ThreadOnCpu(0, 225), 0, 0));
    CHECK(Is(flipped.ThreadOnCpu(0, 125), 100, 13));  // chunk 1 still reads
    CHECK(flipped.unread_chunks() == 1);
    REQUIRE(truncate(copy.c_str(), static_cast<off_t>(light->sideband_offsets[1] + 40)) == 0);
    CHECK(Is(cut.ThreadOnCpu(0, 125), 0, 0));
    CHECK(Is(cut.ThreadOnCpu(0, 225), 0, 0));
    CHECK(Is(cut.ThreadOnCpu(0, 25), 100, 3));  // chunk 0 is intact
    CHECK(cut.unread_chunks() == 2);
  }

  // Gone after Build (a look-up inside a chunk finds it unreadable), or before.
  const SidebandTimeline built = SidebandTimeline::Build(*light, 1);
  REQUIRE(std::remove(path.c_str()) == 0);
  CHECK(Is(built.ThreadOnCpu(0, 125), 0, 0));
  CHECK(Is(built.ThreadOnCpu(0, 145), 100, 15));  // past chunk 1's runs: its latest, kept
  CHECK(built.unread_chunks() == 1);
  const SidebandTimeline gone = SidebandTimeline::Build(*light, 1);
  CHECK(gone.unread_chunks() == 3);
  CHECK(Is(gone.ThreadOnCpu(0, 125), 0, 0));
}

TEST_CASE("a perf.data's schedule read again from the file in perf's order: the answers of the "
          "import that held and time-sorted it") {
  // Three ranges of records, each CPU's in time order, CPU 1's of a round before the end of
  // CPU 0's (perf's ring-buffer order), trace pieces between them: read again with one run held,
  // every look-up answers as the held import does.
  const ptscope::testing::TempDir dir("ptscope-timeline");
  const std::string path = dir / "rounds.data";
  REQUIRE(format::ExportPerfData(ptscope::testing::PerCpuRoundsArchive(50, 250), path));
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    REQUIRE(f != nullptr);
    std::vector<uint8_t> bytes;
    for (int c; (c = std::fgetc(f)) != EOF;) bytes.push_back(static_cast<uint8_t>(c));
    std::fclose(f);
    bytes = ptscope::testing::WithTraceBetweenRecords(bytes, 10000);
    f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
    std::fclose(f);
  }
  auto whole = format::ImportPerfData(path);
  auto left = format::ImportPerfData(path, format::ReadOptions{.keep_sideband_bytes = false});
  REQUIRE(whole);
  REQUIRE(left);
  REQUIRE(left->sideband_ranges.size() == 3);
  const SidebandTimeline held = SidebandTimeline::Build(*whole, 1);
  const SidebandTimeline read_again = SidebandTimeline::Build(*left, 1);
  CHECK(!held.schedule_streamed());
  CHECK(read_again.schedule_streamed());
  CHECK(held.notes().empty());
  CHECK(read_again.notes().empty());
  CHECK(read_again.records() == held.records());
  CHECK(read_again.ScheduledThreads() == held.ScheduledThreads());
  CHECK(read_again.ScheduledThreads().size() == 3);
  CHECK(read_again.ProcessName(7) == "rounds");
  REQUIRE(read_again.address_space().modules().size() == 1);
  CHECK(read_again.address_space().modules()[0].path == "/opt/rounds");
  size_t answered = 0;
  for (uint64_t time = 0; time < 50 * 10000; time += 3) {
    for (uint32_t cpu = 0; cpu < 2; ++cpu) {
      uint64_t since_held = 1, since_again = 2;
      const ThreadKey want = held.ThreadOnCpu(cpu, time, &since_held);
      const ThreadKey got = read_again.ThreadOnCpu(cpu, time, &since_again);
      if (!(got == want) || since_held != since_again) {
        CAPTURE(time);
        CAPTURE(cpu);
        CHECK(got == want);
        CHECK(since_held == since_again);
      }
      answered += want.tid != 0;
    }
  }
  CHECK(answered == 2 * 166667 - 2);  // all but CPU 1 before its first switch (at 5): 0, 3
  // Round 2, CPU 1, switch 3 (time 20035): thread 100 + (2 + 3 + 1) % 3 = 100 came in; on CPU 0
  // (at 20030) thread 100 + (2 + 3) % 3 = 102.
  CHECK(Is(read_again.ThreadOnCpu(1, 20037), 7, 100));
  CHECK(Is(read_again.ThreadOnCpu(0, 20037), 7, 102));
  CHECK(read_again.unread_chunks() == 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ptscope::decode
