// CpuSchedule: which thread runs on each CPU over time, from the schedule records of the sideband
// (per-CPU captures: a switch-in, a CPU-wide switch-out naming the next thread, ITRACE_START).
//
// A per-CPU capture has two such records per context switch, as many as the capture is long
// (110 K on a 1 G-instruction pt-synth capture of 4 threads on 2 CPUs: 1.8 MB as 16-byte runs,
// 18 MB at 10 G). So that peak memory does not grow with the capture, the runs are held only up
// to a budget (all CPUs together); past it, a CPU keeps one Span per sideband chunk that has runs
// on it (its first and last time, and its latest run: 40 bytes for some thousand records), and a
// look-up inside a chunk's span reads that chunk again (ChunkRuns) into a small cache, every CPU's
// runs at once. Look-ups come in time order (a unit's sync point, each re-enable; the per-CPU
// streams' units are decoded merged by time), so nearly all hit the cache, and each chunk is
// read about once.
//
// The answer is the one a stable sort of all runs by time would give (at one time: the file's
// order, chunk by chunk). That needs each CPU's chunks to follow each other in time: every run of
// a later chunk at or after every run of the earlier ones (what a recorder writes; a chunk's own
// runs may be in any order). A CPU whose chunks overlap in time is held whole instead (read again
// once at Finish when past the budget): correct, only not bounded.
//
// Thread-safe for look-ups after Finish (pt-decode's workers share one): held runs are only read;
// the cache has a mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "events.h"

namespace ptscope::decode {

class CpuSchedule {
 public:
  struct Run {
    uint64_t from_ns = 0;
    ThreadKey thread;
  };
  struct CpuRun {
    uint32_t cpu = 0;
    Run run;
  };
  // The schedule runs of sideband chunk `chunk`, every CPU's, in file order; false when the chunk
  // cannot be read again (the file changed or went away since Build read it).
  using ChunkRuns = std::function<bool(size_t chunk, std::vector<CpuRun>* runs)>;

  // Runs held before the schedule keeps spans instead: 256 K, 4 MB. (Reading chunks again and the
  // look-ups' lock cost 2 % more instructions on a capture with a switch every 5 K instructions,
  // pt-synth --timeslice 2000; on captures under the budget, nothing.)
  static constexpr size_t kHeldRuns = size_t{1} << 18;
  explicit CpuSchedule(size_t held_runs = kHeldRuns) : held_budget_(held_runs) {}

  // Each run as read, chunk by chunk in file order.
  void Add(size_t chunk, uint32_t cpu, const Run& run);
  // After the last Add. `chunk_runs` reads a chunk's runs again whenever a look-up needs them
  // (kept; it must stay usable as long as this schedule is looked up).
  void Finish(ChunkRuns chunk_runs);

  // The thread on `cpu` at `time_ns` ({0, 0}: none known: idle, or before the CPU's first run),
  // and in *since_ns when that run began (0 before the first). A chunk that cannot be read again
  // answers {0, 0} for its times and counts in unread_chunks().
  ThreadKey ThreadOn(uint32_t cpu, uint64_t time_ns, uint64_t* since_ns) const;
  // Every thread (tid != 0) some run names, sorted by (pid, tid).
  const std::vector<ThreadKey>& threads() const { return threads_; }
  // Chunks a look-up (or Finish) needed and could not read again.
  size_t unread_chunks() const;
  // Whether some CPU's runs are looked up from chunks read again (for tests).
  bool streamed() const;

 private:
  struct Span {  // one chunk's runs on one CPU
    size_t chunk = 0;
    uint64_t first_ns = 0, last_ns = 0;  // the earliest and latest run time
    Run latest;                          // the latest run (the file's last among equal times)
  };
  struct PerCpu {
    std::vector<Run> runs;    // every run, sorted by time (stable), while held
    std::vector<Span> spans;  // chunk order
    bool held = true;         // runs holds every run of the CPU
    bool in_order = true;     // each span starts no earlier than the previous one's last run
  };
  struct Cached {  // one chunk's runs, every CPU's: per-CPU units are decoded in time order
    size_t chunk = SIZE_MAX;
    std::vector<std::pair<uint32_t, std::vector<Run>>> by_cpu;  // by CPU; runs sorted by time
    uint64_t used = 0;
  };
  static ThreadKey Lookup(const std::vector<Run>& sorted, uint64_t time_ns, uint64_t* since_ns);
  void DropHeldRuns();
  void HoldWhole(uint32_t cpu, PerCpu& state);
  // Under cache_->mutex: the runs of `chunk`, read again if needed; null if unreadable.
  const Cached* RunsOf(size_t chunk) const;

  struct Cache {  // look-ups' state (behind a pointer: a schedule moves, a mutex does not)
    static constexpr size_t kEntries = 4;  // a chunk for each worker, and the next ones
    std::mutex mutex;
    Cached entries[kEntries];
    uint64_t uses = 0;
    std::vector<size_t> unread;  // chunks that could not be read again, sorted, distinct
  };

  size_t held_budget_;
  size_t held_ = 0;         // runs held, all CPUs
  bool dropped_ = false;    // past the budget: no CPU holds its runs unless it must
  std::map<uint32_t, PerCpu> cpus_;
  std::vector<ThreadKey> threads_;
  ChunkRuns chunk_runs_;
  std::unique_ptr<Cache> cache_ = std::make_unique<Cache>();
};

}  // namespace ptscope::decode
