// ThreadAssembler: the join stage. Takes the decoded units in plan order (parallel/unit_planner.h:
// per-thread streams stream by stream, then per-CPU units by start time), joins each to the unit
// before it in its stream (unit_join.h), and feeds each thread's events to its StackTracker
// (thread_feed.h): a per-thread stream as its units come; per-CPU streams' runs through CpuThreads,
// which puts each thread's runs from several CPUs back in time order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "capture/decoder_setup.h"
#include "capture/sideband_timeline.h"
#include "capture/streams.h"
#include "events.h"
#include "flow/unit_events.h"
#include "join/cpu_threads.h"
#include "join/thread_feed.h"
#include "join/unit_join.h"
#include "ptscope/decode.h"
#include "stack/record_spill.h"
#include "stack/stack_tracker.h"
#include "work_unit.h"

namespace ptscope::decode {

class ThreadAssembler {
 public:
  // All must outlive the assembler. `selected`: --threads (empty: all). Threads' counts, times
  // and first errors go to `summary` as they end.
  // With `jobs` > 1 (and no summary sink), per-thread units' stacks are tracked on the workers
  // (Speculate) and reconciled here; `in_flight`: how many units may be between Speculate and
  // Consume (unit i keeps its speculation in slot i % in_flight).
  ThreadAssembler(const format::Archive& archive, const DecoderSetup& setup,
                  const SidebandTimeline& timeline, std::vector<Stream>& streams, CodeFacts& code,
                  const FeedSinks& sinks, const std::vector<uint32_t>& selected,
                  DecodeSummary& summary, unsigned jobs = 1, size_t in_flight = 0);

  // On worker `worker`, right after unit `index` was decoded (DecodeUnits' after_decode): its
  // stack tracking from an unknown incoming stack (StackTracker::Speculate), which Consume then
  // reconciles. Per-thread streams only: a per-CPU unit's threads are tracked at the join.
  void Speculate(size_t index, const WorkUnit& work, unsigned worker, const UnitEvents& events);

  // The next unit in plan order, the `index`th (its events are taken).
  void Consume(size_t index, const WorkUnit& work, UnitEvents& events);
  // After the last unit: ends every thread; a stream none of whose trace could be decoded still
  // gets its track and gaps (`decoded(stream)` says whether any unit of it was planned, and
  // `windowed` whether --time-range cut the capture, which leaves such tracks out).
  void Finish(const std::function<bool(size_t)>& decoded, bool windowed);
  // Empty unless held-back slice records could not be read back from the spill file: the output
  // then lacks them, and the decode fails (stack/record_spill.h).
  std::string spill_error() const { return spill_.error(); }
  // Where units met code without bytes (FlowStats::missing_code_ips of them all).
  std::vector<uint64_t> missing_code_ips() const {
    return {missing_code_ips_.begin(), missing_code_ips_.end()};
  }

 private:
  void FinishThread();
  void BeginThread(const Stream& stream);

  const SidebandTimeline& timeline_;
  std::vector<Stream>& streams_;
  CodeFacts& code_;
  FeedSinks sinks_;
  std::vector<UnitJoin> joins_;  // per stream
  // The per-thread stream being fed (they come one after another) and its piece.
  std::unique_ptr<ThreadFeed> feed_;
  size_t feed_stream_ = SIZE_MAX, feed_piece_ = SIZE_MAX;
  uint64_t last_end_ip_ = 0, last_end_ns_ = 0;
  DecodeSummary& summary_;
  // Every thread's held-back slice records past a block wait here (as they are or encoded in
  // memory up to budgets, then in a file); declared before the trackers that use it.
  RecordSpill spill_;
  StackTrackerOptions tracker_options_;
  CpuThreads cpu_threads_;
  std::set<uint64_t> missing_code_ips_;

  // Per-unit stack tracking (Speculate): a ring of speculations, unit i in slot i % size (see
  // UnitsInFlight), and each worker's tracker (for the process of its last unit).
  struct WorkerTracker {
    std::unique_ptr<SliceSink> sink;  // never written: a speculating tracker keeps its records
    std::unique_ptr<StackTracker> tracker;
    uint32_t pid = 0;
  };
  std::vector<StackTracker::Speculation> speculations_;
  std::vector<WorkerTracker> worker_trackers_;
};

}  // namespace ptscope::decode
