// The only place the decode stages are wired together (decode/README.md draws them):
//
//   capture/   the archive's metadata, sideband and PT streams
//   names/     modules found by build id; CodeFacts for the stages, names for the sinks
//   parallel/  each stream cut into decode units at PSBs as the workers ask for them
//   flow/      units decoded on the workers into events (pure: a unit's facts only)
//   join/      units joined per stream, each thread's events fed to its stack tracker
//   stack/     events -> slices;   sink/  slices -> the output
// or, for --format insns, the same units' instructions listed per thread (listing/).
//
// Units are decoded on a worker pool, at most a window ahead of the consumer, and consumed on the
// calling thread in plan order (parallel/unit_pool.h), so the call stacks are those of one
// sequential pass and the output is the same for every --jobs value; memory is bounded by the
// window, not by the capture.
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "capture/capture_view.h"
#include "capture/selection.h"
#include "capture/torn_jit.h"
#include "flow/code_images.h"
#include "join/thread_assembler.h"
#include "listing/insn_listing.h"
#include "names/capture_resolver.h"
#include "names/frame_namer.h"
#include "parallel/decode_units.h"
#include "parallel/time_window.h"
#include "ptscope/decode.h"
#include "sink/output_sink.h"

namespace ptscope::decode {
namespace {

// --threads that select nothing: every thread's name and instructions, from a decode of them all
// that writes nothing.
Unexpected NoThreadSelected(format::Archive& archive, const PipelineOptions& options) {
  PipelineOptions all = options;
  all.threads.clear();
  all.time_from_ns = 0;
  all.time_to_ns = UINT64_MAX;
  all.format = OutputFormat::kSummary;
  all.count_only = true;
  all.summary_json_path.clear();
  all.progress = nullptr;
  return NoSuchThreads(archive.path, options.threads, RunPipeline(archive, all));
}

}  // namespace

ResolvedModules::ResolvedModules(std::unique_ptr<State> state) : state_(std::move(state)) {}
ResolvedModules::~ResolvedModules() = default;

Result<std::unique_ptr<ResolvedModules>> ResolvedModules::ForArchive(
    const format::Archive& archive, const PipelineOptions& options) {
  auto state = std::make_unique<State>(options);
  PTSCOPE_TRY(state->capture.AddArchiveBlobs(archive));
  return std::unique_ptr<ResolvedModules>(new ResolvedModules(std::move(state)));
}

Result<DecodeSummary> RunPipeline(format::Archive& archive, const PipelineOptions& options) {
  DecodeSummary summary;
  summary.output_path = options.output_path;
  PTSCOPE_ASSIGN_OR_RETURN(CaptureView view, ViewCapture(archive, options, summary));
  if (!SelectsAny(options.threads, view.streams, view.timeline)) {
    return NoThreadSelected(archive, options);
  }
  const TimeWindow window = WindowOf(view, options, archive.path);
  std::unique_ptr<ResolvedModules> own_modules;  // unless the caller keeps them between decodes
  if (options.resolved == nullptr) {
    PTSCOPE_ASSIGN_OR_RETURN(own_modules, ResolvedModules::ForArchive(archive, options));
  }
  ResolvedModules::State& modules = (own_modules ? *own_modules : *options.resolved).state();
  symbols::ModuleResolver& resolver = modules.capture.resolver();
  symbols::Symbolizer& symbolizer = modules.symbolizer;
  symbols::JitCodeStore jit = symbols::JitCodeStore::FromArchive(archive, summary.notes);
  std::vector<std::unique_ptr<CodeImages>> images = CodeImages::ForWorkers(
      std::max(1u, options.jobs), view.timeline, view.streams, resolver, jit);
  summary.missing = images[0]->missing();

  if (options.format == OutputFormat::kInsns) {
    if (!options.summary_json_path.empty()) {
      return Unexpected(Errc::kInvalidArgument, "an instruction listing has no call slices to "
                                                "summarize: --summary-json needs another format");
    }
    PTSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<InsnListing> listing,
                             InsnListing::Open(options.output_path, view.streams, options.threads));
    DecodeUnits(view, TimeWindow{}, archive.path, images, nullptr, options,  // (all of it)
                [&](size_t, const WorkUnit& work, UnitEvents& events) {
                  listing->Consume(work, events);
                });
    PTSCOPE_TRY(listing->Finish(summary));
    summary.notes.insert(summary.notes.end(), resolver.notes().begin(), resolver.notes().end());
    return summary;
  }

  SymbolsFrameNamer namer(view.timeline.address_space(), resolver, symbolizer);
  if (!jit.empty()) namer.SetJitCode(&jit);
  // The output (one that keeps nothing with count_only) and --summary-json's, both clipped to
  // --time-range.
  auto open = [&](SinkFormat format, const std::string& path) {
    return OpenOutput(format, path, namer, window.active, window.from_ns, window.to_ns);
  };
  PTSCOPE_ASSIGN_OR_RETURN(OutputSink output,
                           open(SinkFormatOf(options.format),
                                options.count_only ? std::string() : options.output_path));
  std::optional<OutputSink> summary_output;
  if (!options.summary_json_path.empty() && !options.count_only) {
    PTSCOPE_ASSIGN_OR_RETURN(summary_output,
                             open(SinkFormat::kSummaryJson, options.summary_json_path));
  }
  const FeedSinks sinks{output.sink(), summary_output ? &summary_output->sink() : nullptr};
  const unsigned jobs = static_cast<unsigned>(images.size());
  ThreadAssembler assembler(archive, view.setup, view.timeline, view.streams, namer, sinks,
                            options.threads, summary, options.stack_per_unit ? jobs : 1,
                            UnitsInFlight(jobs));
  const DecodedUnits decoded = DecodeUnits(
      view, window, archive.path, images, &namer, options,
      [&](size_t index, const WorkUnit& work, UnitEvents& events) {
        assembler.Consume(index, work, events);
      },
      [&](size_t index, const WorkUnit& work, unsigned worker, UnitEvents& events) {
        assembler.Speculate(index, work, worker, events);
      });
  assembler.Finish([&](size_t stream) { return decoded.planned[stream]; }, window.active);
  // Held-back records that could not be read back are missing from the output, as if its write
  // had failed.
  if (std::string error = assembler.spill_error(); !error.empty()) {
    return Unexpected(Errc::kIo, error);
  }
  summary.sideband_unread_chunks = view.timeline.unread_chunks();
  if (summary.sideband_unread_chunks != 0) {
    summary.notes.push_back(
        std::to_string(summary.sideband_unread_chunks) + " sideband chunk" +
        (summary.sideband_unread_chunks == 1 ? "" : "s") + " of " + archive.path +
        " could not be read again (the file changed or went away during the decode): which "
        "thread ran on a CPU is unknown where they were needed");
  }
  // A module nobody ran code of made no gap: it is not reported missing.
  summary.missing = images[0]->MissingThatRan(assembler.missing_code_ips());
  for (std::string& note : TornJitNotes(archive, assembler.missing_code_ips()))
    summary.notes.push_back(std::move(note));

  const bool outside = NoteWindow(window, options, summary);
  summary.stats[Stat::kWalkerFallbackUnits] = decoded.libipt_units;
  summary.stats[Stat::kPacketFallbackUnits] = decoded.packet_units;
  if (decoded.packet_units != 0) {
    summary.notes.push_back(std::to_string(decoded.packet_units) + " of " +
                            std::to_string(decoded.units) + " decode units hold packets our "
                            "query decoder does not model: libipt's query decoder read them");
  }
  if (decoded.libipt_units != 0) {
    summary.notes.push_back(std::to_string(decoded.libipt_units) + " of " +
                            std::to_string(decoded.units) + " decode units hold trace the "
                            "walker does not model: libipt's block decoder walked them");
  }
  for (SliceSink* sink : {&sinks.output, sinks.summary}) {
    if (sink != nullptr) PTSCOPE_TRY(FinishOutput(*sink, summary));
  }
  if (outside) {  // an error: no output is left behind
    for (const std::string& path : {options.output_path, options.summary_json_path}) {
      if (!options.count_only && !path.empty() && path != "-") std::remove(path.c_str());
    }
    uint64_t span = summary.last_ns > window.capture_start_ns
                        ? summary.last_ns - window.capture_start_ns : 0;
    return WindowOutsideCapture(archive.path, options.time_from_ns, options.time_to_ns, span);
  }
  for (ThreadCount& thread : summary.per_thread) {
    thread.process = view.timeline.ProcessName(thread.pid);
    thread.thread = view.timeline.ThreadName(thread.tid);
  }
  for (const std::string& failure : symbolizer.failures()) {
    summary.notes.push_back("cannot load symbols: " + failure);
  }
  for (std::string& note : namer.UnsymbolizedNotes()) summary.notes.push_back(std::move(note));
  summary.notes.insert(summary.notes.end(), resolver.notes().begin(), resolver.notes().end());
  return summary;
}

}  // namespace ptscope::decode
