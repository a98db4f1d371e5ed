// ThreadFeed: one thread's stitched FlowEvents into its StackTracker (used by the pipeline for
// per-thread streams and by CpuThreads for the threads of per-CPU streams).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "capture/decoder_setup.h"
#include "capture/streams.h"
#include "events.h"
#include "flow/unit_events.h"
#include "ptscope/decode.h"
#include "ptscope/format.h"
#include "stack/stack_tracker.h"

namespace ptscope::decode {

// Hands `out` a kTrigger event for every mark of `triggers` (sorted by time) from *next on that
// is due by `time_ns`, never earlier than `floor_ns` (the thread's last event time).
template <typename Out>
void DeliverDueTriggers(const std::vector<TriggerMark>& triggers, size_t* next, uint64_t time_ns,
                        uint64_t floor_ns, Out&& out) {
  while (*next < triggers.size() && triggers[*next].time_ns <= time_ns) {
    FlowEvent trigger;
    trigger.kind = FlowEvent::Kind::kTrigger;
    trigger.time_ns = std::max(triggers[*next].time_ns, floor_ns);
    trigger.to = triggers[*next].address;
    trigger.detail = triggers[*next].text;
    ++*next;
    out(trigger);
  }
}

// What a decode writes: its output and, with pt-decode --summary-json, the JSON summary of the
// same decode beside it.
struct FeedSinks {
  SliceSink& output;
  SliceSink* summary = nullptr;
  void BeginThread(const ThreadKey& key, const std::string& process_name,
                   const std::string& thread_name) const {
    output.BeginThread(key, process_name, thread_name);
    if (summary != nullptr) summary->BeginThread(key, process_name, thread_name);
  }
};

// Feeds one thread's stitched events to its StackTracker: triggers in time order among them,
// lost-data gaps between pieces, the end; counts instructions in named functions.
// With a summary sink the same events also go to a second StackTracker writing to it: one
// decode, two outputs, each exactly what it would be alone (the trackers are independent, as they
// must be: a summary needs every nesting level, a trace folds those past max_depth).
class ThreadFeed {
 public:
  ThreadFeed(const ThreadKey& key, CodeFacts& code, const FeedSinks& sinks,
             std::vector<TriggerMark> triggers, StackTrackerOptions tracker_options = {})
      : key_(key),
        code_(code),
        tracker_(key, code, sinks.output, tracker_options),
        triggers_(std::move(triggers)) {
    if (sinks.summary != nullptr) {
      summary_tracker_ =
          std::make_unique<StackTracker>(key, code, *sinks.summary, tracker_options);
    }
    NoteNextTrigger();
  }

  void Deliver(FlowEvent& event) {
    Counting counting = counting_;
    Step(counting, event);
    counting_ = counting;
  }
  // Deliver for each of `events`, with the per-event state in a local for the run: as members,
  // the tracker's calls could change them for all the compiler knows, so each would be loaded
  // and stored again per event.
  void DeliverRun(std::span<FlowEvent> events) {
    Counting counting = counting_;
    for (FlowEvent& event : events) {
      // The unit's events were written by the walker a while ago: most of this loop's samples
      // waited on their loads (perf annotate, synth-100M). Past the end is harmless.
      __builtin_prefetch(&event + kPrefetchAhead);
      Step(counting, event);
    }
    counting_ = counting;
  }
  // How DeliverUnit tracked a unit's stack.
  enum class UnitTracking { kSerial, kReconciled, kReplayed };
  // A unit's events, with what a worker's StackTracker made of them (StackTracker::Speculate):
  // reconciled with this thread's stack where the worker's guesses hold, event by event where
  // not (kReplayed: from the first wrong guess on). The output is DeliverRun's either way. Not
  // with a summary tracker, and not when the unit's first event is earlier than the last one
  // delivered (the clamp would change times the worker used): then as DeliverRun.
  UnitTracking DeliverUnit(std::span<FlowEvent> events, const StackTracker::Speculation& spec) {
    if (!spec.valid || summary_tracker_ || events.empty() || spec.events.size() != events.size() ||
        events[0].time_ns != spec.first_time_ns || events[0].time_ns < counting_.last_ns) {
      DeliverRun(events);
      return UnitTracking::kSerial;
    }
    tracker_.BeginAdopt(spec, events[0].insn_count);
    Counting counting = counting_;
    for (size_t i = 0; i < events.size(); ++i) Step<true>(counting, events[i], i);
    counting_ = counting;
    return tracker_.EndAdopt() ? UnitTracking::kReconciled : UnitTracking::kReplayed;
  }
  void Gap(GapCause cause, std::string detail, uint64_t insn_count) {
    FlowEvent gap;
    gap.kind = FlowEvent::Kind::kGap;
    gap.insn_count = insn_count;
    gap.gap_cause = cause;
    gap.time_ns = counting_.last_ns;
    gap.detail = std::move(detail);
    Deliver(gap);
  }
  void AddStats(const FlowStats& stats) {
    stats_.instructions += stats.instructions;
    stats_.events += stats.events;
    stats_.counts.Add(stats.counts);
    stats_.first_ns = std::min(stats_.first_ns, stats.first_ns);
    stats_.last_ns = std::max(stats_.last_ns, stats.last_ns);
    if (stats_.first_error.empty()) stats_.first_error = stats.first_error;
  }
  void CountGap(GapCause cause) { stats_.counts[GapStat(cause)]++; }
  // `end_ns`: when the thread's last traced instruction ran, if known (UnitEvents::end_ns); the
  // instructions after its last event ran until then, and a trigger due by then is shown.
  void Finish(uint64_t last_end_ip, uint64_t trailing_insns, uint64_t end_ns = 0) {
    FlowEvent end;
    end.kind = FlowEvent::Kind::kEnd;
    end.from = last_end_ip;
    end.insn_count = trailing_insns;
    // The extrapolated end is a guess; a trigger still to come is a measured time at or after
    // the thread's last traced instruction (it stopped the trace), so the end does not pass it.
    if (next_trigger_ < triggers_.size()) {
      end_ns = std::min(end_ns, triggers_[next_trigger_].time_ns);
    }
    end.time_ns = std::max(counting_.last_ns, end_ns);
    // A trace that stops in a gap and no later time known: how long the gap lasted is not.
    ends_in_gap_ = counting_.in_gap && end.time_ns == counting_.gap_from_ns;
    Deliver(end);
    // Triggers after the thread's last instruction (typically the one that stopped the capture)
    // are still shown at their own time, after its slices have closed.
    DeliverDueTriggers(triggers_, &next_trigger_, UINT64_MAX, end.time_ns,
                       [this](FlowEvent& trigger) { Track(trigger); });
    NoteNextTrigger();
    NoteWatch(counting_.timing);
    const uint64_t end_time = std::max(stats_.last_ns == 0 ? 0 : stats_.last_ns, counting_.last_ns);
    tracker_.Finish(end_time);
    if (summary_tracker_) summary_tracker_->Finish(end_time);
  }
  const FlowStats& stats() const { return stats_; }
  const DecodeStats& tracker_stats() const { return tracker_.stats(); }
  std::pair<uint64_t, uint64_t> adopted_events() const { return tracker_.adopted_events(); }
  uint64_t symbolized() const { return counting_.symbolized; }
  uint64_t instructions() const { return counting_.instructions; }
  // Nanoseconds from the thread's first event to its last, and those of them in gaps.
  uint64_t traced_ns() const {
    return counting_.first_ns == UINT64_MAX ? 0 : counting_.last_ns - counting_.first_ns;
  }
  uint64_t gap_ns() const { return counting_.gap_ns; }
  bool ends_in_gap() const { return ends_in_gap_; }
  const ThreadKey& key() const { return key_; }

 private:
  // One compare per event instead of an index check and a 48-byte-stride load.
  void NoteNextTrigger() {
    next_trigger_ns_ =
        next_trigger_ < triggers_.size() ? triggers_[next_trigger_].time_ns : UINT64_MAX;
  }
  // Step's watch_ns_ after a trigger or a gap-time change (`timing`: Counting::timing).
  void NoteWatch(bool timing) { watch_ns_ = timing ? 0 : next_trigger_ns_; }
  static constexpr size_t kPrefetchAhead = 8;  // events: 384 bytes
  // What Deliver keeps from one event to the next.
  struct Counting {
    uint64_t last_ns = 0;  // the last event's time
    uint64_t last_to = 0;  // the last non-zero `to`: where an event without `from` happened
    // The stretch of named or unnamed code around the last address asked about (within its
    // mapping), [range_start, range_start + range_size), and all ones in symbolized_mask when it
    // is named.
    uint64_t range_start = 0, range_size = 0, symbolized_mask = 0;
    uint64_t symbolized = 0;  // instructions counted in named functions
    uint64_t instructions = 0;  // all of them
    // Time: from the first event to the last, and how much of it lay in gaps (from each gap to
    // the next event). `timing` is set until the first event and while in a gap.
    bool timing = true, in_gap = false;
    uint64_t first_ns = UINT64_MAX, gap_from_ns = 0, gap_ns = 0;
  };
  // kAdopt: the event is the `index`th of a unit being reconciled (DeliverUnit).
  template <bool kAdopt = false>
  [[gnu::always_inline]] void Step(Counting& c, FlowEvent& event, size_t index = 0) {
    if (event.time_ns < c.last_ns) event.time_ns = c.last_ns;  // non-decreasing per thread
    // Triggers and gap time in one test of the time (watch_ns_) and one of the kind: most
    // threads have no trigger, and time in gaps is counted only around a gap.
    if (watch_ns_ <= event.time_ns || event.kind == FlowEvent::Kind::kGap) [[unlikely]] {
      Watch(c, event);
    }
    CountSymbolized(c, event);
    c.instructions += event.insn_count;
    c.last_ns = event.time_ns;
    if constexpr (kAdopt) {
      tracker_.AdoptEvent(event, index);
    } else {
      Track(event);
    }
  }
  // Delivers the triggers due by `event` (before it) and counts its gap time. Inline: a call
  // would take the address of Step's Counting, which would then live in memory.
  [[gnu::always_inline]] void Watch(Counting& c, FlowEvent& event) {
    // Tested here: GCC leaves the template's call out of line.
    if (next_trigger_ns_ <= event.time_ns) {
      DeliverDueTriggers(triggers_, &next_trigger_, event.time_ns, c.last_ns,
                         [this](FlowEvent& trigger) { Track(trigger); });
      NoteNextTrigger();
    }
    if (c.timing | (event.kind == FlowEvent::Kind::kGap)) CountGapTime(c, event);
    NoteWatch(c.timing);
  }
  [[gnu::always_inline]] void Track(const FlowEvent& event) {
    tracker_.OnEvent(event);
    if (summary_tracker_) [[unlikely]] summary_tracker_->OnEvent(event);
  }
  static void CountGapTime(Counting& c, const FlowEvent& event) {
    if (c.first_ns == UINT64_MAX) {
      c.first_ns = event.time_ns;
    } else if (c.in_gap) {
      c.gap_ns += event.time_ns - c.gap_from_ns;
    }
    c.in_gap = c.timing = event.kind == FlowEvent::Kind::kGap;
    c.gap_from_ns = event.time_ns;
  }
  [[gnu::always_inline]] void CountSymbolized(Counting& c, const FlowEvent& event) {
    uint64_t where = event.from != 0 ? event.from : c.last_to;
    if (event.to != 0) c.last_to = event.to;
    // Almost always inside the cached mapping: one unsigned compare and a branch-free add (adding
    // a zero insn_count changes nothing).
    if (where - c.range_start < c.range_size && where != 0) [[likely]] {
      c.symbolized += event.insn_count & c.symbolized_mask;
    } else if (event.insn_count != 0 && where != 0) {
      // Code moves between a few stretches (a named function and the unnamed code it calls, a
      // module and the library, the stretches a static glibc's signal trampolines cut its text
      // into): the last ones asked about are kept too, most recent first.
      const Stretch found =
          StretchAt(Stretch{c.range_start, c.range_size, c.symbolized_mask}, where, event.time_ns);
      c.range_start = found.start;
      c.range_size = found.size;
      c.symbolized_mask = found.mask;
      c.symbolized += event.insn_count & c.symbolized_mask;
    }
  }

  // Stretches asked about before the one in Counting (CountSymbolized): with two, bench-workload's
  // snprintf, between three stretches, asked CodeFacts::InNamedCode at 3% of its events (each a
  // lock, a mapping and a symbol table look-up: 3% of a pt-decode -j1's instructions).
  struct Stretch {
    uint64_t start = 0, size = 0, mask = 0;
  };
  static constexpr size_t kRecentStretches = 3;
  Stretch recent_[kRecentStretches];
  // The stretch holding `where`: a recent one (which trades places with `front`, the one in
  // Counting), else CodeFacts' answer (and `front` becomes the most recent). Out of line, and
  // given `front` by value: Counting stays in registers in DeliverRun's loop.
  [[gnu::noinline]] Stretch StretchAt(Stretch front, uint64_t where, uint64_t time_ns) {
    size_t at = 0;
    while (at < kRecentStretches && where - recent_[at].start >= recent_[at].size) ++at;
    if (at < kRecentStretches) {
      std::swap(front, recent_[at]);
      return front;
    }
    for (size_t i = kRecentStretches - 1; i > 0; --i) recent_[i] = recent_[i - 1];
    recent_[0] = front;
    uint64_t start = 0, end = 0;  // the answer holds for a whole stretch
    const bool symbolized = code_.InNamedCode(key_.pid, where, time_ns, &start, &end);
    return Stretch{start, end > start ? end - start : 0, symbolized ? ~uint64_t{0} : 0};
  }

  ThreadKey key_;
  CodeFacts& code_;
  StackTracker tracker_;
  std::unique_ptr<StackTracker> summary_tracker_;  // with --summary-json only
  std::vector<TriggerMark> triggers_;
  size_t next_trigger_ = 0;
  uint64_t next_trigger_ns_ = UINT64_MAX;  // triggers_[next_trigger_].time_ns, if any
  // The time from which Step calls Watch: 0 while Counting::timing (until the first event and
  // in a gap), else next_trigger_ns_.
  uint64_t watch_ns_ = 0;
  FlowStats stats_;
  Counting counting_;
  bool ends_in_gap_ = false;
};

// Adds a finished thread's counts, time span and first decode error to the summary.
void AddThreadToSummary(const ThreadFeed& feed, DecodeSummary& summary);

}  // namespace ptscope::decode
