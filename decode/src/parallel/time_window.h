// --time-range on the trace clock: which units the planner cuts (parallel/unit_planner.h), what
// the sinks keep (sink/window_sink.h), and what the summary says of it.
#pragma once

#include <cstdint>
#include <string>

#include "capture/capture_view.h"
#include "ptscope/decode.h"

namespace ptscope::decode {

// --time-range on the trace clock: offsets from the capture's first PSB with a time.
struct TimeWindow {
  bool active = false;
  uint64_t capture_start_ns = 0, from_ns = 0, to_ns = UINT64_MAX;
};
TimeWindow WindowOf(const CaptureView& view, const PipelineOptions& options,
                    const std::string& path);
// After decoding: a note on what the output holds (the summary's counts are of the units
// overlapping the window); true, and no note, when the window missed the capture altogether
// (capture/selection.h's WindowOutsideCapture says so).
bool NoteWindow(const TimeWindow& window, const PipelineOptions& options, DecodeSummary& summary);

}  // namespace ptscope::decode
