// The capture before decoding (see capture_view.h).
#include "capture/capture_view.h"


namespace ptscope::decode {

Result<CaptureView> ViewCapture(format::Archive& archive, const PipelineOptions& options,
                                DecodeSummary& summary) {
  PTSCOPE_ASSIGN_OR_RETURN(DecoderSetup setup, SetupFromMetadata(archive));
  if (!setup.cpu_note.empty()) summary.notes.push_back(setup.cpu_note);
  CaptureView view{std::move(setup),
                   SidebandTimeline::Build(archive, options.held_schedule_runs != 0
                                                        ? options.held_schedule_runs
                                                        : CpuSchedule::kHeldRuns),
                   {},
                   {}};
  summary.notes.insert(summary.notes.end(), view.timeline.notes().begin(),
                       view.timeline.notes().end());
  view.streams = CollectStreams(archive, view.timeline);
  if (view.streams.empty()) {
    return Unexpected(Errc::kNotFound, archive.path + ": the archive holds no PT data to decode");
  }
  std::erase_if(view.streams, [&](const Stream& stream) {
    return stream.cpu < 0 && !Selected(options.threads, stream.key);
  });  // (when nothing is left selected, the pipeline says what there is: capture/selection.h)
  for (Stream& stream : view.streams) {
    if (stream.cpu < 0) stream.triggers = TriggersOf(archive, view.setup, stream.key.tid);
  }
  pt_config_init(&view.config);
  view.setup.Apply(view.config);
  return view;
}

}  // namespace ptscope::decode
