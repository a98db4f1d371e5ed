#include "sink/sink_factory.h"

#include "sink/folded_sink.h"
#include "sink/output_file.h"
#include "sink/perfetto_sink.h"
#include "sink/speedscope_sink.h"
#include "sink/summary_sink.h"
#include "sink/text_sink.h"

namespace ptscope::decode {
namespace {
bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

Result<SinkFormat> ParseSinkFormat(const std::string& name) {
  if (name == "perfetto" || name == "pftrace" || name == "proto") return SinkFormat::kPerfetto;
  if (name == "text" || name == "txt") return SinkFormat::kText;
  if (name == "folded") return SinkFormat::kFolded;
  if (name == "summary") return SinkFormat::kSummary;
  if (name == "summary-json") return SinkFormat::kSummaryJson;
  if (name == "speedscope") return SinkFormat::kSpeedscope;
  return Unexpected(Errc::kInvalidArgument,
                    "output format '" + name +
                        "' is unknown: use perfetto, text, folded, summary, summary-json or speedscope");
}

SinkFormat SinkFormatForPath(const std::string& path) {
  std::string p = EndsWith(path, ".gz") ? path.substr(0, path.size() - 3) : path;
  if (EndsWith(p, ".summary.txt")) return SinkFormat::kSummary;
  if (EndsWith(p, ".summary.json")) return SinkFormat::kSummaryJson;
  if (EndsWith(p, ".speedscope.json")) return SinkFormat::kSpeedscope;
  if (EndsWith(p, ".txt")) return SinkFormat::kText;
  if (EndsWith(p, ".folded")) return SinkFormat::kFolded;
  return SinkFormat::kPerfetto;
}

Result<std::unique_ptr<SliceSink>> CreateSink(SinkFormat format, const std::string& path,
                                              FrameNamer& namer, const SinkOptions& options) {
  PTSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> out, OutputFile::Open(path));
  std::unique_ptr<SliceSink> sink;
  switch (format) {
    case SinkFormat::kPerfetto: sink = std::make_unique<PerfettoSink>(std::move(out), namer); break;
    case SinkFormat::kText: sink = std::make_unique<TextSink>(std::move(out), namer); break;
    case SinkFormat::kFolded: sink = std::make_unique<FoldedSink>(std::move(out), namer); break;
    case SinkFormat::kSpeedscope:
      sink = std::make_unique<SpeedscopeSink>(std::move(out), namer);
      break;
    case SinkFormat::kSummary:
      sink = std::make_unique<SummarySink>(std::move(out), namer, options.summary_top);
      break;
    case SinkFormat::kSummaryJson:
      sink = std::make_unique<SummarySink>(std::move(out), namer, options.summary_top,
                                           SummarySink::Encoding::kJson);
      break;
  }
  return sink;
}

Result<std::unique_ptr<SliceSink>> CreateSink(const std::string& format, const std::string& path,
                                              FrameNamer& namer) {
  PTSCOPE_ASSIGN_OR_RETURN(SinkFormat parsed, ParseSinkFormat(format));
  return CreateSink(parsed, path, namer);
}

SinkFormat SinkFormatOf(OutputFormat format) {
  switch (format) {
    case OutputFormat::kText: return SinkFormat::kText;
    case OutputFormat::kFolded: return SinkFormat::kFolded;
    case OutputFormat::kSummary: return SinkFormat::kSummary;
    case OutputFormat::kSummaryJson: return SinkFormat::kSummaryJson;
    case OutputFormat::kSpeedscope: return SinkFormat::kSpeedscope;
    case OutputFormat::kPerfetto:
    case OutputFormat::kInsns: break;
  }
  return SinkFormat::kPerfetto;
}

const char* OutputFormatName(OutputFormat format) {
  switch (format) {
    case OutputFormat::kPerfetto: return "perfetto";
    case OutputFormat::kText: return "text";
    case OutputFormat::kFolded: return "folded";
    case OutputFormat::kInsns: return "insns";
    case OutputFormat::kSummary: return "summary";
    case OutputFormat::kSummaryJson: return "summary-json";
    case OutputFormat::kSpeedscope: return "speedscope";
  }
  return "?";
}

}  // namespace ptscope::decode
