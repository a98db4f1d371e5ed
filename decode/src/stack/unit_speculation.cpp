// StackTracker's speculation on a worker and its reconciliation at the join (per-unit stack
// tracking: the join no longer runs every event of a unit through one tracker).
//
// The worker's tracker starts each unit with one sentinel frame standing for the incoming stack,
// whose contents it cannot know. An event "touches" the incoming stack when it runs with nothing
// of the unit's own above the sentinel, pops down to it, or scans past it for a landing frame
// (FindLandingFrame finding nothing). Every other event reads and changes only the unit's own
// frames, so on the join's tracker, whose stack ends with those same frames, it would emit the
// same records and leave the same frames: the join copies them. A touch the join runs itself
// (OnEvent, with the unit's frames before it put back on its stack), then compares the unit's
// frames it left with those the worker guessed; if they differ, the worker's guess about the
// incoming stack was wrong and the rest of the unit goes through OnEvent. Byte identity never
// depends on a guess: a guess is used only where it was checked.
//
// What only the join knows stays there: the buffer bound and flushes, the depth cap (Write),
// written_open_ (which frames were written out), the anchor, and the instruction count before the
// unit (records are shifted by it).
#include <algorithm>

#include "stack/stack_tracker.h"

namespace ptscope::decode {
namespace {
// An address no frame has: what marks the sentinel.
constexpr uint64_t kSentinelAddress = UINT64_MAX;
// Never reached by a worker's unit (memory is the unit's records anyway).
constexpr size_t kSpeculationBound = size_t{1} << 40;
}  // namespace

void StackTracker::Speculate(std::span<const FlowEvent> events, Speculation& out) {
  out.Clear();
  Frame sentinel;
  sentinel.id.address = kSentinelAddress;
  speculating_ = true;
  stack_.assign(1, sentinel);
  options_.spill = nullptr;
  options_.max_buffered_events = kSpeculationBound;
  flush_at_ = SIZE_MAX;
  buffer_size_ = 0;
  position_ = 0;
  last_time_ = 0;
  anchored_ = true;
  stats_ = {};
  inferred_prefix_.clear();
  texts_.clear();
  std::vector<Frame> before;  // the unit's frames before an event that may touch
  DecodeStats saved;
  for (const FlowEvent& e : events) {
    if (e.kind == FlowEvent::Kind::kTrigger) [[unlikely]] {  // the join's (ThreadFeed), never a unit's
      speculating_ = false;
      return;
    }
    const uint64_t t = std::max(e.time_ns, last_time_);  // ThreadFeed's clamp, within the unit
    if (out.events.empty()) {
      out.first_insn_count = e.insn_count;
      out.first_time_ns = e.time_ns;
    }
    position_ += e.insn_count;
    last_time_ = t;
    const size_t size = stack_.size();
    const bool may_touch = MayTouch(e, size);
    if (may_touch) {
      saved = stats_;
      before.assign(stack_.begin() + 1, stack_.end());
    }
    const size_t records_before = buffer_size_;
    written_open_ = size;  // NoteClosed lowers it to the fewest frames during the event
    touched_ = false;
    DispatchOutOfLine(e, t);
    Speculation::Event& se = out.events.emplace_back();
    if (size <= 1 || written_open_ <= 1 || touched_) {
      if (!may_touch) [[unlikely]] {  // MayTouch covers every way down: the join replays the unit
        speculating_ = false;
        return;
      }
      // The join runs this event itself: nothing of it stays here but the frames it left.
      stats_ = saved;
      buffer_size_ = records_before;
      inferred_prefix_.clear();
      // A return to no frame of the unit's is most often one that unwinds into the incoming
      // stack (a function opened before the unit returns, with frames above it still open, as
      // main returning to __libc_start_call_main): guessing the unit's frames closed costs only
      // touches for the events that involve them, where a wrong guess would leave the join
      // tracking events itself until its frames and the worker's agree again.
      const bool return_missed = touched_ && e.kind == FlowEvent::Kind::kReturn;
      if (return_missed || stack_.empty() || stack_[0].id.address != kSentinelAddress) {
        stack_.assign(1, sentinel);  // the incoming stack changed under the unit's frames
      } else {
        stack_[0] = sentinel;
      }
      Speculation::Touch& touch = out.touches.emplace_back();
      touch.before_first = static_cast<uint32_t>(out.frames.size());
      touch.before_count = static_cast<uint32_t>(before.size());
      out.frames.insert(out.frames.end(), before.begin(), before.end());
      touch.after_first = static_cast<uint32_t>(out.frames.size());
      touch.after_count = static_cast<uint32_t>(stack_.size() - 1);
      out.frames.insert(out.frames.end(), stack_.begin() + 1, stack_.end());
      touch.stats = stats_;
      se.touch = static_cast<uint32_t>(out.touches.size() - 1);
    }
    se.records_end = static_cast<uint32_t>(buffer_size_);
    se.local_after = static_cast<uint32_t>(stack_.size() - 1);
    se.local_min = static_cast<uint32_t>(std::min(written_open_, stack_.size()) - 1);
  }
  out.records.assign(buffer_.begin(), buffer_.begin() + static_cast<ptrdiff_t>(buffer_size_));
  out.final_frames.assign(stack_.begin() + 1, stack_.end());
  out.stats = stats_;
  out.valid = true;
  speculating_ = false;
}

void StackTracker::BeginAdopt(const Speculation& spec, uint64_t first_insn_count) {
  adopting_ = &spec;
  in_sync_ = true;
  adopt_failed_ = false;
  adopted_open_ = 0;
  adopted_records_ = 0;
  adopted_stats_ = {};
  adopted_position_delta_ = static_cast<int64_t>(position_ + first_insn_count) -
                            static_cast<int64_t>(spec.first_insn_count);
}

void StackTracker::AddAdoptedStats(const DecodeStats& upto) {
  for (size_t i = 0; i < kStatCount; ++i) {
    stats_.counts[i] += upto.counts[i] - adopted_stats_.counts[i];
  }
  adopted_stats_ = upto;
}

void StackTracker::AdoptEvent(const FlowEvent& e, size_t index) {
  if (adopting_ == nullptr) {
    OnEvent(e);
    return;
  }
  const Speculation& spec = *adopting_;
  const Speculation::Event& se = spec.events[index];
  if (se.touch != UINT32_MAX) {
    const Speculation::Touch& touch = spec.touches[se.touch];
    if (in_sync_) {  // the unit's frames back on the stack, and the counts of the events copied
      AddAdoptedStats(touch.stats);
      const Frame* before = spec.frames.data() + touch.before_first;
      stack_.insert(stack_.end(), before, before + touch.before_count);
      adopted_open_ = 0;
    }
    ++adopted_events_.second;
    OnEvent(e);
    // Whether the unit's frames it left are the worker's. If not, the worker's guess about the
    // incoming stack was wrong: OnEvent until a touch leaves the frames the worker has (at the
    // latest one that leaves none of the unit's: then the worker has none either).
    const Frame* after = spec.frames.data() + touch.after_first;
    in_sync_ = stack_.size() >= touch.after_count &&
               std::equal(after, after + touch.after_count, stack_.end() - touch.after_count);
    if (!in_sync_) {
      adopt_failed_ = true;
      return;
    }
    stack_.resize(stack_.size() - touch.after_count);
    adopted_open_ = touch.after_count;
    adopted_records_ = se.records_end;
    adopted_stats_ = touch.stats;  // the counts of the events before it are in stats_
    return;
  }
  if (!in_sync_) {
    OnEvent(e);
    ++adopted_events_.second;
    return;
  }
  ++adopted_events_.first;
  // OnEvent's bookkeeping (the times are those the worker saw, never clamped here), then the
  // worker's records.
  position_ += e.insn_count;
  last_time_ = e.time_ns;
  if (buffer_size_ >= flush_at_) [[unlikely]] FlushBetweenEvents();
  for (size_t i = adopted_records_; i < se.records_end; ++i) {
    if (buffer_size_ == buffer_slots_) [[unlikely]] GrowBuffer();
    Record& r = buffer_.data()[buffer_size_++];
    r = spec.records[i];
    r.instructions = static_cast<uint64_t>(static_cast<int64_t>(r.instructions) +
                                           adopted_position_delta_);
    if (r.type == RecordType::kBegin) {
      buffer_depth_max_ = std::max(buffer_depth_max_, ++buffer_depth_);
    } else if (r.type == RecordType::kEnd) {
      buffer_depth_min_ = std::min(buffer_depth_min_, --buffer_depth_);
    }
  }
  adopted_records_ = se.records_end;
  // NoteClosed over the event's pops (never down to nothing: the unit's frames stayed above).
  written_open_ = std::min(written_open_, stack_.size() + se.local_min);
  adopted_open_ = se.local_after;
}

bool StackTracker::EndAdopt() {
  if (adopting_ == nullptr) return false;
  const Speculation& spec = *adopting_;
  if (in_sync_) {
    AddAdoptedStats(spec.stats);
    stack_.insert(stack_.end(), spec.final_frames.begin(), spec.final_frames.end());
  }
  adopted_open_ = 0;
  adopting_ = nullptr;
  return !adopt_failed_;
}

}  // namespace ptscope::decode
