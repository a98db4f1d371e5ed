// CpuSchedule: the same thread for every look-up as a stable sort of all runs by time gives
// (the reference below), whether the runs are held or looked up from chunks read again; chunks
// read once each for look-ups in time order; a chunk that cannot be read again answers "none
// known" and is counted, never a wrong thread.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "capture/cpu_schedule.h"

namespace ptscope::decode {
namespace {

using Chunks = std::vector<std::vector<CpuSchedule::CpuRun>>;

// What the schedule must answer: the last run at or before `time` of a stable sort by time of
// the CPU's runs in file order.
ThreadKey Reference(const Chunks& chunks, uint32_t cpu, uint64_t time, uint64_t* since) {
  std::vector<CpuSchedule::Run> runs;
  for (const auto& chunk : chunks) {
    for (const CpuSchedule::CpuRun& run : chunk) {
      if (run.cpu == cpu) runs.push_back(run.run);
    }
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [](const auto& a, const auto& b) { return a.from_ns < b.from_ns; });
  *since = 0;
  ThreadKey thread;
  for (const CpuSchedule::Run& run : runs) {
    if (run.from_ns > time) break;
    thread = run.thread;
    *since = run.from_ns;
  }
  return thread;
}

// A schedule of `chunks` holding at most `held` runs; chunk_runs counts its reads in *reads and
// fails for the chunks in `unreadable`.
CpuSchedule Build(const Chunks& chunks, size_t held, std::map<size_t, int>* reads,
                  std::vector<size_t> unreadable = {}) {
  CpuSchedule schedule(held);
  for (size_t c = 0; c < chunks.size(); ++c) {
    for (const CpuSchedule::CpuRun& run : chunks[c]) schedule.Add(c, run.cpu, run.run);
  }
  schedule.Finish([chunks, reads, unreadable](size_t chunk, std::vector<CpuSchedule::CpuRun>* runs) {
    ++(*reads)[chunk];
    if (std::count(unreadable.begin(), unreadable.end(), chunk) != 0) return false;
    *runs = chunks.at(chunk);
    return true;
  });
  return schedule;
}

// Chunks of runs on CPUs 0 to 2 whose times follow each other from chunk to chunk per CPU, in
// any order inside a chunk, with equal times inside a chunk and across a chunk boundary.
Chunks OrderedChunks(uint32_t seed) {
  std::mt19937 random(seed);
  Chunks chunks(12);
  uint64_t time = 100;
  for (auto& chunk : chunks) {
    for (int i = 0; i < 30; ++i) {
      time += random() % 3;  // 0: the same time as the run before
      const uint32_t cpu = random() % 3, tid = random() % 5;
      chunk.push_back({cpu, {time, ThreadKey{tid == 0 ? 0u : 7u, tid}}});
    }
    std::shuffle(chunk.begin(), chunk.end(), random);
  }
  return chunks;
}

void CheckAgainstReference(const CpuSchedule& schedule, const Chunks& chunks) {
  for (uint32_t cpu = 0; cpu < 4; ++cpu) {
    for (uint64_t time = 0; time < 1000; ++time) {
      uint64_t since = 1, expected_since = 2;
      const ThreadKey expected = Reference(chunks, cpu, time, &expected_since);
      const ThreadKey got = schedule.ThreadOn(cpu, time, &since);
      INFO("cpu " << cpu << " time " << time);
      CHECK(got == expected);
      CHECK(since == expected_since);
    }
  }
}

TEST_CASE("held or streamed, every look-up is the stable sort's answer") {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const Chunks chunks = OrderedChunks(seed);
    std::map<size_t, int> held_reads, streamed_reads;
    const CpuSchedule held = Build(chunks, SIZE_MAX, &held_reads);
    const CpuSchedule streamed = Build(chunks, 0, &streamed_reads);
    CHECK(!held.streamed());
    CHECK(streamed.streamed());
    CheckAgainstReference(held, chunks);
    CheckAgainstReference(streamed, chunks);
    CHECK(held_reads.empty());
    // In time order, CPU after CPU: each chunk read at most once per CPU.
    for (const auto& [chunk, reads] : streamed_reads) CHECK(reads <= 3);
    CHECK(streamed.unread_chunks() == 0);
    CHECK(held.threads() == streamed.threads());
    // In time order, every CPU at each time (as per-CPU units are decoded): each chunk once.
    std::map<size_t, int> time_major_reads;
    const CpuSchedule time_major = Build(chunks, 0, &time_major_reads);
    for (uint64_t time = 0; time < 1000; ++time) {
      for (uint32_t cpu = 0; cpu < 3; ++cpu) {
        uint64_t since = 0, expected_since = 0;
        CHECK(time_major.ThreadOn(cpu, time, &since) ==
              Reference(chunks, cpu, time, &expected_since));
        CHECK(since == expected_since);
      }
    }
    CHECK(time_major_reads.size() == chunks.size());
    for (const auto& [chunk, reads] : time_major_reads) CHECK(reads == 1);
  }
}

TEST_CASE("past the budget mid-way, runs are dropped and looked up from the chunks") {
  const Chunks chunks = OrderedChunks(7);
  std::map<size_t, int> reads;
  const CpuSchedule schedule = Build(chunks, 100, &reads);  // 360 runs
  CHECK(schedule.streamed());
  CheckAgainstReference(schedule, chunks);
}

TEST_CASE("a CPU whose chunks overlap in time is read again once and held whole") {
  Chunks chunks = OrderedChunks(3);
  std::swap(chunks[2], chunks[9]);  // later runs first in the file
  std::map<size_t, int> reads;
  const CpuSchedule schedule = Build(chunks, 0, &reads);
  CHECK(!schedule.streamed());
  const size_t reads_at_finish = reads.size();
  CHECK(reads_at_finish == chunks.size());
  CheckAgainstReference(schedule, chunks);
  int total = 0;
  for (const auto& [chunk, count] : reads) total += count;
  CHECK(total == 3 * static_cast<int>(chunks.size()));  // at Finish, once per CPU, never again
}

TEST_CASE("a chunk that cannot be read again: none known inside it, counted once") {
  Chunks chunks(3);
  chunks[0] = {{0, {10, {7, 1}}}, {0, {20, {7, 2}}}};
  chunks[1] = {{0, {30, {7, 3}}}, {0, {40, {7, 4}}}, {0, {50, {7, 5}}}};
  chunks[2] = {{0, {60, {7, 6}}}, {0, {70, {7, 7}}}};
  std::map<size_t, int> reads;
  const CpuSchedule schedule = Build(chunks, 0, &reads, {1});
  uint64_t since = 0;
  CHECK(schedule.ThreadOn(0, 25, &since) == ThreadKey{7, 2});
  CHECK(since == 20);
  CHECK(schedule.ThreadOn(0, 35, &since) == ThreadKey{});  // inside chunk 1
  CHECK(since == 0);
  CHECK(schedule.ThreadOn(0, 45, &since) == ThreadKey{});
  CHECK(schedule.ThreadOn(0, 55, &since) == ThreadKey{7, 5});  // past it: its latest run
  CHECK(since == 50);
  CHECK(schedule.ThreadOn(0, 65, &since) == ThreadKey{7, 6});
  CHECK(schedule.ThreadOn(0, 5, &since) == ThreadKey{});  // before the first
  CHECK(schedule.unread_chunks() == 1);
  CHECK(reads[1] == 1);  // not tried again
  CHECK(schedule.threads().size() == 7);
}

}  // namespace
}  // namespace ptscope::decode
