// What --threads and --time-range select, and the errors that say what the capture holds when
// they select nothing: its threads (names, instructions) or its time span.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "capture/sideband_timeline.h"
#include "capture/streams.h"
#include "ptscope/decode.h"
#include "ptscope/format.h"

namespace ptscope::decode {

// Whether `threads` (tids or pids; empty: all) selects a per-thread stream of `streams` or a
// thread the sideband shows running on a CPU of a per-CPU stream.
bool SelectsAny(const std::vector<uint32_t>& threads, const std::vector<Stream>& streams,
                const SidebandTimeline& timeline);

// kInvalidArgument naming the ids and listing every thread of the capture with its process and
// instruction count: `counted` is a decode of all threads (count_only), or its error.
Unexpected NoSuchThreads(const std::string& path, const std::vector<uint32_t>& threads,
                         const Result<DecodeSummary>& counted);

// kInvalidArgument for a --time-range that misses the capture (starts after its last timestamp):
// the capture spans [0, span_ns] relative to its start.
Unexpected WindowOutsideCapture(const std::string& path, uint64_t from_ns, uint64_t to_ns,
                              uint64_t span_ns);

}  // namespace ptscope::decode
