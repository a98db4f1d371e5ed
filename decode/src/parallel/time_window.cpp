// --time-range (see time_window.h).
#include "parallel/time_window.h"

#include "parallel/unit_planner.h"  // CaptureStartNs

namespace ptscope::decode {

TimeWindow WindowOf(const CaptureView& view, const PipelineOptions& options,
                    const std::string& path) {
  TimeWindow window;
  window.active = options.time_from_ns != 0 || options.time_to_ns != UINT64_MAX;
  // Only a window needs the capture's start before decoding (units are found as they are decoded).
  if (!window.active) return window;
  window.capture_start_ns = CaptureStartNs(view.streams, view.setup, view.config, path);
  window.from_ns = window.capture_start_ns + options.time_from_ns;
  window.to_ns = options.time_to_ns > UINT64_MAX - window.capture_start_ns
                     ? UINT64_MAX
                     : window.capture_start_ns + options.time_to_ns;
  return window;
}

bool NoteWindow(const TimeWindow& window, const PipelineOptions& options, DecodeSummary& summary) {
  if (!window.active) return false;
  const uint64_t start = window.capture_start_ns;
  uint64_t span = summary.last_ns > start ? summary.last_ns - start : 0;
  // (Only when something was decoded: a capture without a timestamp has no span to miss.)
  if (summary.first_ns != UINT64_MAX &&
      (options.time_from_ns > span ||
       (options.time_to_ns != UINT64_MAX && start + options.time_to_ns < summary.first_ns))) {
    return true;
  }
  std::string to = options.time_to_ns == UINT64_MAX ? "the end" : std::to_string(options.time_to_ns) + " ns";
  summary.notes.push_back("--time-range: slices from " + std::to_string(options.time_from_ns) +
                          " ns to " + to + " after the capture start (the capture spans " +
                          std::to_string(span) + " ns); instructions counted in the decode "
                          "units that overlap it");
  return false;
}

}  // namespace ptscope::decode
