// One output of a decode as the pipeline opens and closes it: the file's sink (or one that keeps
// nothing), behind the --time-range clip when there is one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "events.h"
#include "ptscope/decode.h"
#include "ptscope/result.h"
#include "sink/sink_factory.h"
#include "sink/window_sink.h"

namespace ptscope::decode {

struct OutputSink {
  std::unique_ptr<SliceSink> file;
  std::unique_ptr<WindowSink> window;
  SliceSink& sink() { return window ? *window : *file; }
};

// An empty path: a sink that keeps nothing (PipelineOptions::count_only). `clip`: keep only
// [from_ns, to_ns] (WindowSink).
Result<OutputSink> OpenOutput(SinkFormat format, const std::string& path, FrameNamer& namer,
                              bool clip, uint64_t from_ns, uint64_t to_ns);

// Gives the sink the capture's totals and finishes it; an error if its output could not be
// written.
Status FinishOutput(SliceSink& sink, const DecodeSummary& totals);

}  // namespace ptscope::decode
