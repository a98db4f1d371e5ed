// CaptureView: what a capture holds before any PT is decoded (its time conversion and CPU, the
// sideband timeline, the selected PT streams), and --time-range on the trace clock.
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <string>
#include <vector>

#include "capture/decoder_setup.h"
#include "capture/sideband_timeline.h"
#include "capture/streams.h"
#include "ptscope/decode.h"
#include "ptscope/format.h"

namespace ptscope::decode {

struct CaptureView {
  DecoderSetup setup;
  SidebandTimeline timeline;
  std::vector<Stream> streams;  // selected by --threads (per-CPU streams are split later)
  pt_config config;             // libipt's, for the capture's CPU and timing
};

// Fails when the capture holds no PT, or none of the selected threads'. Notes (CPU, sideband
// damage) go to `summary`.
Result<CaptureView> ViewCapture(format::Archive& archive, const PipelineOptions& options,
                                DecodeSummary& summary);

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
