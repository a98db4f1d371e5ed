// Opening and finishing the pipeline's outputs (see output_sink.h).
#include "sink/output_sink.h"

#include "sink/null_sink.h"

namespace ptscope::decode {

Result<OutputSink> OpenOutput(SinkFormat format, const std::string& path, FrameNamer& namer,
                              bool clip, uint64_t from_ns, uint64_t to_ns) {
  OutputSink output;
  if (path.empty()) {
    output.file = std::make_unique<NullSink>();
  } else {
    PTSCOPE_ASSIGN_OR_RETURN(output.file, CreateSink(format, path, namer));
  }
  if (clip) output.window = std::make_unique<WindowSink>(*output.file, from_ns, to_ns);
  return output;
}

Status FinishOutput(SliceSink& sink, const DecodeSummary& totals) {
  sink.SetCaptureTotals(totals);
  sink.Finish();
  std::string output_error = sink.OutputError();
  if (!output_error.empty()) return Unexpected(Errc::kIo, output_error);
  return Ok();
}

}  // namespace ptscope::decode
