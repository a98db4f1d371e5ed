// One call for the pipeline: the sink for an output format, writing to `path` ("-" = stdout,
// ".gz" suffix = gzip for any format).
#pragma once

#include <memory>
#include <string>

#include "events.h"
#include "ptscope/decode.h"
#include "ptscope/result.h"

namespace ptscope::decode {

enum class SinkFormat { kPerfetto, kText, kFolded, kSummary, kSummaryJson, kSpeedscope };

// "perfetto" (also "pftrace", "proto"), "text", "folded", "summary", "summary-json",
// "speedscope". Errors name
// the value and the choices. The names of OutputFormatName (ptscope/decode.h) parse to their
// sink format.
Result<SinkFormat> ParseSinkFormat(const std::string& name);
// Format implied by an output path: *.summary.txt -> summary, *.summary.json -> summary-json,
// *.speedscope.json -> speedscope, *.txt -> text, *.folded -> folded, anything else perfetto
// (.gz is looked through).
SinkFormat SinkFormatForPath(const std::string& path);
// The sink of a pt-decode output format (not kInsns, which is no sink of slices).
SinkFormat SinkFormatOf(OutputFormat format);

struct SinkOptions {
  size_t summary_top = 0;  // summary: rows per table (0 = all)
};

Result<std::unique_ptr<SliceSink>> CreateSink(SinkFormat format, const std::string& path,
                                              FrameNamer& namer, const SinkOptions& options = {});
Result<std::unique_ptr<SliceSink>> CreateSink(const std::string& format, const std::string& path,
                                              FrameNamer& namer);

}  // namespace ptscope::decode
