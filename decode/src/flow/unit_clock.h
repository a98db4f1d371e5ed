// UnitClock: the time of each event of one decode unit. libipt knows time only at timing packets,
// so each packet anchors an (instruction position, time) pair, and every event between two
// anchors gets a time interpolated by instruction count; events after the last anchor get the
// rate of the last anchored interval. Events therefore wait, in place in the unit's buffer, until
// the next anchor (no copy, no text, no allocation).
//
// Unit-local: a unit starts at a PSB, whose TSC is its first anchor, and the next unit's PSB is
// not used as an anchor (a sequential decoder does not use it either), so a unit's times depend on
// its own packets only, and the join needs no time state. (Times are made non-decreasing per
// thread after the join, join/thread_feed.h.)
#pragma once

#include <algorithm>
#include <cstdint>

#include "flow/event_buffer.h"
#include "flow/unit_events.h"

namespace ptscope::decode {

// a * b / c without overflow; 64-bit arithmetic when the product fits (nearly always: a is a
// time step in ns, b an instruction count), which is several times cheaper than 128-bit division.
// (Per event, UnitClock divides by a reciprocal instead: Divider below. A double reciprocal had
// measured no faster on AMD Zen 3; on the Xeon the benchmarks run on, the `div` was a quarter of
// FlowDecoder::Anchor's time.)
inline uint64_t MulDiv(uint64_t a, uint64_t b, uint64_t c) {
  if ((a >> 32) == 0 && (b >> 32) == 0) return a * b / c;
  return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b / c);
}

// x / divisor, rounded down, for many x and one divisor: a multiplication by a reciprocal made
// once, and one exact correction. Every waiting event of an interval is divided by the same
// instruction count, and a 64-bit division was most of UnitClock's time (perf annotate on
// pt-decode: the instruction after the `div` held a quarter of FlowDecoder::Anchor's samples;
// on this Xeon a `div r64` issues about once every 10 cycles, the multiplications every cycle).
//
// Why exact: reciprocal_ = floor((2^64-1)/d) >= 2^64/d - 1, so x * reciprocal_ / 2^64 >
// x/d - x/2^64 > x/d - 1, and the product's high half q0 is floor(x/d) or one less (never more,
// as reciprocal_ <= 2^64/d). Then r = x - q0*d (<= x, so no overflow) is >= d exactly when q0
// is one short.
class Divider {
 public:
  explicit Divider(uint64_t divisor) : divisor_(divisor), reciprocal_(UINT64_MAX / divisor) {}
  uint64_t Divide(uint64_t x) const {
    const uint64_t q =
        static_cast<uint64_t>((static_cast<unsigned __int128>(x) * reciprocal_) >> 64);
    return q + (x - q * divisor_ >= divisor_ ? 1 : 0);
  }
  // MulDiv(a, b, divisor), the same value for every input: the product, when it fits in 64 bits
  // (then MulDiv's 64-bit and 128-bit forms agree), through Divide; otherwise MulDiv's 128-bit
  // division.
  uint64_t MulDiv(uint64_t a, uint64_t b) const {
    uint64_t product;
    if (!__builtin_mul_overflow(a, b, &product)) [[likely]] return Divide(product);
    return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b / divisor_);
  }

 private:
  uint64_t divisor_, reciprocal_;
};

class UnitClock {
 public:
  // Events of `events` from first_waiting() on have no time yet.
  size_t Waiting(const EventBuffer& events) const { return events.size() - first_waiting_; }
  bool have_anchor() const { return have_anchor_; }
  uint64_t anchor_ns() const { return anchor_ns_; }

  // Time `ns` at instruction `position`: times the waiting events (interpolated since the last
  // anchor) and becomes the anchor. Returns `ns`, never earlier than the last anchor.
  uint64_t Anchor(uint64_t ns, uint64_t position, EventBuffer& events, FlowStats& stats) {
    if (have_anchor_ && ns < anchor_ns_) ns = anchor_ns_;
    const uint64_t span = position - anchor_position_;
    if (have_anchor_ && span != 0) {
      const uint64_t step_ns = ns - anchor_ns_, from_position = anchor_position_, from_ns = anchor_ns_;
      const Divider per_span(span);
      TimeWaiting(events, stats, [=](uint64_t at) {
        return from_ns + per_span.MulDiv(step_ns, at - from_position);
      });
    } else {
      TimeWaiting(events, stats, [=](uint64_t) { return ns; });
    }
    if (have_anchor_ && position > anchor_position_) {
      rate_ns_ = ns - anchor_ns_;
      rate_insns_ = position - anchor_position_;
    }
    have_anchor_ = true;
    anchor_ns_ = ns;
    anchor_position_ = position;
    return ns;
  }
  // Times the waiting events at the last anchored rate (or the anchor's time without one).
  void Extrapolate(EventBuffer& events, FlowStats& stats) {
    const uint64_t from_ns = anchor_ns_;
    if (have_anchor_ && rate_insns_ != 0) {
      const uint64_t rate_ns = rate_ns_, from_position = anchor_position_;
      const Divider per_rate(rate_insns_);
      TimeWaiting(events, stats, [=](uint64_t at) {
        return from_ns + per_rate.MulDiv(rate_ns, at - from_position);
      });
    } else {
      TimeWaiting(events, stats, [=](uint64_t) { return from_ns; });
    }
  }
  // After trace was lost (a gap): the next timing packet starts afresh instead of interpolating
  // across the loss.
  void Forget() { have_anchor_ = false; }
  // When the instruction at `position` (the unit's last) ran: the last event's time, or later at
  // the last rate.
  uint64_t EndNs(uint64_t position) const {
    uint64_t end = last_ns_;
    if (have_anchor_ && rate_insns_ != 0) {
      end = std::max(end, anchor_ns_ + MulDiv(rate_ns_, position - anchor_position_, rate_insns_));
    }
    return end;
  }

 private:
  // Gives every waiting event the time `time_of(its position)`, never going back. A waiting
  // event's position is waiting_base_ plus the insn_count of the waiting events up to and
  // including it, so no position needs storing per event. The work of nearly every event: the
  // state stays in registers (times never go back, so the first event's time is the smallest).
  template <typename TimeOf>
  void TimeWaiting(EventBuffer& events, FlowStats& stats, const TimeOf& time_of) {
    FlowEvent* event = events.data() + first_waiting_;
    FlowEvent* const end = events.data() + events.size();
    if (event == end) return;
    stats.events += static_cast<uint64_t>(end - event);
    uint64_t position = waiting_base_;
    uint64_t last_ns = last_ns_;
    position += event->insn_count;
    last_ns = std::max(time_of(position), last_ns);
    event->time_ns = last_ns;
    stats.first_ns = std::min(stats.first_ns, last_ns);
    for (++event; event != end; ++event) {
      position += event->insn_count;
      last_ns = std::max(time_of(position), last_ns);
      event->time_ns = last_ns;
    }
    last_ns_ = stats.last_ns = last_ns;
    first_waiting_ = events.size();
    waiting_base_ = position;  // the last timed event's position
  }

  size_t first_waiting_ = 0;
  uint64_t waiting_base_ = 0;  // the position of the last event before the waiting ones
  bool have_anchor_ = false;
  uint64_t anchor_ns_ = 0, anchor_position_ = 0;
  uint64_t rate_ns_ = 0, rate_insns_ = 0;  // ns per instruction of the last anchored interval
  uint64_t last_ns_ = 0;                   // the last timed event's time
};

}  // namespace ptscope::decode
