// CaptureView: what a capture holds before any PT is decoded (its time conversion and CPU, the
// sideband timeline, the selected PT streams). (--time-range: parallel/time_window.h.)
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

}  // namespace ptscope::decode
