// UnitJoin: what crosses the join between consecutive units of one stream. Units are decoded
// independently (flow/flow_decoder.h), so a unit knows nothing of the one before; what a
// sequential decoder would have carried over is restored here, in consumption order:
//  - instructions: those retired after a unit's last event count in the first event of the unit
//    that continues it (FlowEvent::insn_count), or in the thread's next gap or its end;
//  - time: nothing (each unit's times come from its own timing packets: flow/unit_clock.h);
//  - inlined depth: nothing (a continuing unit states the depth of its first block, and the
//    stack tracker takes a statement of the depth it has as a no-op).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "flow/unit_events.h"

namespace ptscope::decode {

class UnitJoin {
 public:
  // `events`, unit `unit` of piece `piece` of this join's stream, is consumed next. Returns
  // whether it continues the unit consumed before (the same piece, the next unit).
  bool Join(size_t piece, size_t unit, UnitEvents& events) {
    const bool follows = valid_ && piece == piece_ && unit == unit_ + 1;
    if (follows) CarryInstructions(events, std::exchange(trailing_insns_, 0));
    valid_ = true;
    piece_ = piece;
    unit_ = unit;
    trailing_insns_ = events.trailing_insns;
    return follows;
  }
  // The instructions retired after the last consumed unit's last event, for a gap or the end of
  // the thread (and no longer for the next unit).
  uint64_t TakeTrailing() { return std::exchange(trailing_insns_, 0); }

 private:
  static void CarryInstructions(UnitEvents& events, uint64_t carried) {
    if (!events.events.empty()) {
      events.events[0].insn_count += carried;
    } else {
      events.trailing_insns += carried;
    }
  }

  bool valid_ = false;
  size_t piece_ = 0, unit_ = 0;
  uint64_t trailing_insns_ = 0;
};

}  // namespace ptscope::decode
