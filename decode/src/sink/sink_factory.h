// One call for the pipeline: the sink for an output format, writing to `path` ("-" = stdout,
// ".gz" suffix = gzip for any format).
#pragma once

#include <memory>
#include <string>

#include "events.h"
#include "ptscope/result.h"

namespace ptscope::decode {

enum class SinkFormat { kPerfetto, kText, kFolded };

// "perfetto" (also "pftrace", "proto"), "text", "folded". Errors name the value and the choices.
Result<SinkFormat> ParseSinkFormat(const std::string& name);
// Format implied by an output path: *.txt -> text, *.folded -> folded, anything else perfetto
// (.gz is looked through).
SinkFormat SinkFormatForPath(const std::string& path);

Result<std::unique_ptr<SliceSink>> CreateSink(SinkFormat format, const std::string& path,
                                              FrameNamer& namer);
Result<std::unique_ptr<SliceSink>> CreateSink(const std::string& format, const std::string& path,
                                              FrameNamer& namer);

}  // namespace ptscope::decode
