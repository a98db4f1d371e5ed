// DecodeUnits: the capture's units planned (unit_planner.h), decoded on the workers by flow/'s
// UnitDecoder and handed back in plan order (unit_pool.h). parallel/ drives flow/: this is where
// the two meet, and flow/ includes nothing of parallel/ (work_unit.h holds what both read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "capture/capture_view.h"
#include "flow/code_images.h"
#include "flow/unit_events.h"
#include "parallel/time_window.h"
#include "ptscope/decode.h"
#include "work_unit.h"

namespace ptscope::decode {

// What decoding every unit left to say: which streams had a unit, and the walker's fallbacks.
struct DecodedUnits {
  std::vector<bool> planned;  // by stream
  uint64_t units = 0, libipt_units = 0;
  uint64_t packet_units = 0;  // PacketQuery refused them (libipt's query decoder read them)
};

// Plans the capture's units (within `window`) as the workers ask, decodes them on one worker per
// CodeImages and hands each to `consume` on this thread, in plan order. `code` may be null (no
// inlined depths: the instruction listing).
// `after_decode(unit, work, worker, events)`, if given, runs on the worker right after the unit's
// decode (e.g. its stack tracking, join/thread_assembler.h); at most UnitsInFlight(jobs) units
// are between it and `consume`.
DecodedUnits DecodeUnits(
    CaptureView& view, const TimeWindow& window, const std::string& path,
    const std::vector<std::unique_ptr<CodeImages>>& images, CodeFacts* code,
    const PipelineOptions& options,
    const std::function<void(size_t, const WorkUnit&, UnitEvents&)>& consume,
    const std::function<void(size_t, const WorkUnit&, unsigned, UnitEvents&)>& after_decode = {});

// How many units may be decoded and not yet consumed with `jobs` workers: unit i can use slot
// i % UnitsInFlight(jobs) of a ring from after_decode until its consume.
size_t UnitsInFlight(unsigned jobs);

}  // namespace ptscope::decode
