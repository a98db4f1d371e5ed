// The decode unit as it passes between stages: parallel/ plans WorkUnits (unit_planner.h),
// flow/ decodes them (unit_decoder.h), join/ and listing/ read which stream and piece a decoded
// unit came from. Plain values, here beside events.h so that flow/ never includes parallel/:
// parallel/ drives flow/, not the other way round (decode/README.md, "Which stage includes
// which", and tests/decode/stage_includes.py, which fails on an arrow against that order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ptscope::decode {

// What the PSB+ header at a unit's start says (parallel/psb_units.h reads it).
struct PsbState {
  bool valid = false;      // libipt decodes a PSB here
  uint64_t tsc = 0;        // 0: the PSB+ carries no TSC
  uint64_t ip = 0;         // FUP: the next instruction to execute
  bool has_ip = false;     // false: tracing was disabled (or the FUP suppressed) at this PSB
  size_t header_end = 0;   // offset just after the PSB+ header (its PSBEND); 0: none read
};

struct DecodeUnitSpan {
  size_t begin = 0;        // offset of the unit's first PSB within the piece
  size_t end = 0;          // offset of the next unit's PSB, or the piece's end
  // The unit is decoded up to here: through the next unit's PSB+ header, so that libipt walks
  // exactly to the instruction where the next unit starts (the header's FUP), as a sequential
  // decoder does; without it libipt stops after the unit's last packet, possibly a few
  // instructions short of that point.
  size_t decode_end = 0;
  PsbState start;          // the PSB+ at `begin`
};

// One unit of work: a span of one piece of one stream, with what its decoder needs to know of the
// unit after it.
struct WorkUnit {
  size_t stream = 0, piece = 0;
  size_t unit = 0;              // index within the piece (> 0: a continuation)
  DecodeUnitSpan span;
  bool has_next = false;        // the piece goes on with another unit
  PsbState next_start;          // that unit's PSB+ (when has_next)
  uint64_t start_ns = 0;        // per-CPU units: merge key (parallel/unit_planner.h)
  bool per_cpu = false;
  // start_ns of the unit planned after this one (UINT64_MAX: none): per-CPU runs that start
  // before it can be delivered once this unit is consumed.
  uint64_t following_start_ns = UINT64_MAX;
  uint64_t planned_bytes = 0;   // PT bytes of the capture planned up to this unit (progress)
  // Non-empty: the rest of the piece could not be read again (the file changed since it was
  // opened?); the unit is that failure, an in-band decode-error gap, with no bytes.
  std::string unreadable;
  // The unit's PT: span's [begin, decode_end) of the piece, in place for a piece in memory, else
  // in `storage`, copied as the planner read the piece (so that a worker reads nothing itself:
  // per-CPU units interleave streams, and one chunk per unit would be read again and again).
  std::span<const uint8_t> bytes;
  std::vector<uint8_t> storage;
};

}  // namespace ptscope::decode
