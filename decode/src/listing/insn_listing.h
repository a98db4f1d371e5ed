// `--format insns`: every retired instruction of every stream as "TID 0xADDRESS" (see
// insn_lister.h), a per-CPU thread's stretches from several CPUs put back in time order.
#pragma once

#include <string>
#include <vector>

#include "flow/code_images.h"
#include "capture/decoder_setup.h"
#include "ptscope/decode.h"
#include "capture/sideband_timeline.h"
#include "capture/streams.h"

namespace ptscope::decode {

Result<DecodeSummary> RunInsns(std::vector<Stream>& streams, const std::string& archive_path,
                               const DecoderSetup& setup,
                               const CodeImages& images, const SidebandTimeline& timeline,
                               const PipelineOptions& options, DecodeSummary summary);

}  // namespace ptscope::decode
