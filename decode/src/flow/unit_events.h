// UnitEvents: what decoding one unit produces (flow_decoder.h), the facts the join stitches to the
// units before and after it (join/unit_join.h). Nothing in it depends on another unit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "events.h"
#include "flow/event_buffer.h"
#include "ptscope/decode.h"

namespace ptscope::decode {

struct FlowStats {
  uint64_t instructions = 0;
  uint64_t events = 0;
  DecodeStats counts;              // gaps by cause (Stat)
  uint64_t first_ns = UINT64_MAX, last_ns = 0;
  std::string first_error;         // first libipt error, with its stream offset
  // Where code bytes were missing (kMissingCode gaps), each address once, at most 16: which
  // missing modules really ran.
  std::vector<uint64_t> missing_code_ips;
};

struct UnitEvents {
  // Which thread each stretch of events belongs to: one run for a per-thread stream; for a
  // per-CPU stream a new run wherever the sideband switches another thread in.
  struct Run {
    ThreadKey thread;
    size_t first = 0;       // index of the run's first event
    size_t first_insn = 0;  // index of its first instruction in `insns`
    uint64_t time_ns = 0;   // when the thread was found running (per-CPU streams)
  };
  // In program order, timed (interpolated between the unit's timing packets, extrapolated after
  // the last one at the rate before it). A unit that continues another states the inlined depth
  // of its first block (a kInlineChange) whatever the depth before it was, which the unit cannot
  // know: the stack tracker takes a statement of the depth it already has as a no-op.
  EventBuffer events;
  std::vector<Run> runs;
  // --format insns only (FlowDecoder::ListInstructions): every instruction retired, in order.
  std::vector<uint64_t> insns;
  FlowStats stats;
  uint64_t last_end_ip = 0;
  // Instructions retired after the last event: a sequential decoder counts them in the next
  // unit's first event (FlowEvent::insn_count); the join does (join/unit_join.h).
  uint64_t trailing_insns = 0;
  // When the unit's last instruction ran: its events' time, extrapolated over the trailing
  // instructions at the rate of the last timed interval (0: no time at all).
  uint64_t end_ns = 0;
  void Reset() {  // for reuse: keeps the vectors' capacity
    events.clear();
    runs.clear();
    insns.clear();
    stats = FlowStats{};
    last_end_ip = trailing_insns = end_ns = 0;
  }
};

}  // namespace ptscope::decode
