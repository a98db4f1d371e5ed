// SidebandTimeline: records of every sideband chunk taken in time order (a stable order: at one
// time, as the file has them) whatever the order of the chunks, for the schedule of each CPU and
// for names and address spaces alike.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "capture/sideband_timeline.h"
#include "ptscope/format.h"
#include "ptscope/perf_records.h"
#include "../support/sideband_records.h"

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

}  // namespace
}  // namespace ptscope::decode
