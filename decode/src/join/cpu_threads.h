// CpuThreads: the threads of per-CPU streams, put back together while the units are decoded.
//
// A per-CPU unit holds runs: stretches of one thread on that CPU (by the context-switch
// sideband). A thread that migrates has runs on several CPUs, which must reach its StackTracker
// in time order. The pipeline consumes per-CPU units in the order of their start times across
// all CPUs, so a run can be delivered as soon as the next unit to come starts after the run's
// first event: no unit still to come can hold an earlier run of any thread (a unit's events are
// not earlier than the TSC of the PSB it starts at). Waiting runs are ordered by (first event
// time, plan index), as sorting every run of the capture would order them. Memory: the runs
// waiting for that (a few units' events) plus the threads' trackers, which are all open at once
// and so share one bound on held-back slice records (StackTrackerOptions::max_buffered_events,
// split evenly between the threads the schedule shows), not the whole capture.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "capture/decoder_setup.h"
#include "capture/sideband_timeline.h"
#include "flow/unit_events.h"
#include "join/thread_feed.h"
#include "ptscope/decode.h"
#include "ptscope/format.h"
#include "stack/stack_tracker.h"

namespace ptscope::decode {

class CpuThreads {
 public:
  CpuThreads(const format::Archive& archive, const DecoderSetup& setup,
             const SidebandTimeline& timeline, CodeFacts& code, const FeedSinks& sinks,
             const std::vector<uint32_t>& selected_threads,
             StackTrackerOptions tracker_options = {});

  // A consumed unit of stream `stream_name` (restatement and carried instructions applied): its
  // counts go to the summary's totals once, its runs wait for Release. Takes the events.
  void Consume(size_t plan_index, const std::string& stream_name, UnitEvents& events);
  // Delivers the waiting runs whose first event is before `frontier_ns`, the start time of the
  // next per-CPU unit to be consumed (UINT64_MAX when there is none).
  void Release(uint64_t frontier_ns);
  // Delivers everything still waiting, ends every thread (in tid order) and adds the counts.
  void Finish(DecodeSummary& summary);

 private:
  struct Run {
    uint32_t tid = 0;
    uint64_t end_ip = 0;  // `from` of the run's last event
    std::vector<FlowEvent> events;
  };
  struct Thread {
    std::unique_ptr<ThreadFeed> feed;
    uint64_t end_ip = 0;
  };
  void Deliver(Run& run);

  const format::Archive& archive_;
  const DecoderSetup& setup_;
  const SidebandTimeline& timeline_;
  CodeFacts& code_;
  FeedSinks sinks_;
  const std::vector<uint32_t>& selected_;
  StackTrackerOptions tracker_options_;
  // By (first event time, plan index); equal keys (one unit, one instant) keep their order.
  std::multimap<std::pair<uint64_t, size_t>, Run> waiting_;
  // Event vectors of delivered runs, kept with their capacity for the next runs: a run then costs
  // a copy of its events but no allocation (most runs are a few hundred events).
  std::vector<std::vector<FlowEvent>> spare_events_;
  std::map<uint32_t, Thread> threads_;                   // by tid
  std::map<uint32_t, ThreadKey> keys_;
  // The units' own counts (once, whoever ran them).
  uint64_t instructions_ = 0;
  DecodeStats counts_;
  uint64_t first_ns_ = UINT64_MAX, last_ns_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace ptscope::decode
