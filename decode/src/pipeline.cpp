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
#include "flow/code_images.h"
#include "flow/unit_decoder.h"
#include "join/thread_assembler.h"
#include "listing/insn_listing.h"
#include "names/capture_resolver.h"
#include "names/frame_namer.h"
#include "parallel/time_window.h"
#include "parallel/unit_planner.h"
#include "parallel/unit_pool.h"
#include "ptscope/decode.h"
#include "sink/null_sink.h"
#include "sink/sink_factory.h"
#include "sink/window_sink.h"

namespace ptscope::decode {
namespace {

constexpr size_t kDefaultUnitBytes = 16 * 1024;

// One output file's sink, behind the --time-range window when there is one.
struct OutputSink {
  std::unique_ptr<SliceSink> file;
  std::unique_ptr<WindowSink> window;
  SliceSink& sink() { return window ? *window : *file; }
};

// An empty path: a sink that keeps nothing (PipelineOptions::count_only).
Result<OutputSink> OpenOutput(SinkFormat format, const std::string& path, FrameNamer& namer,
                              const TimeWindow& window) {
  OutputSink output;
  if (path.empty()) {
    output.file = std::make_unique<NullSink>();
  } else {
    PTSCOPE_ASSIGN_OR_RETURN(output.file, CreateSink(format, path, namer));
  }
  if (window.active) {
    output.window = std::make_unique<WindowSink>(*output.file, window.from_ns, window.to_ns);
  }
  return output;
}

// What decoding every unit left to say: which streams had a unit, and the walker's fallbacks.
struct Decoded {
  std::vector<bool> planned;  // by stream
  uint64_t units = 0, libipt_units = 0;
};

// Plans the capture's units (within `window`) as the workers ask, decodes them on one worker per
// CodeImages and hands each to `consume` on this thread, in plan order.
Decoded DecodeUnits(CaptureView& view, const TimeWindow& window, const std::string& path,
                    const std::vector<std::unique_ptr<CodeImages>>& images, CodeFacts* code,
                    const PipelineOptions& options,
                    const std::function<void(size_t, const WorkUnit&, UnitEvents&)>& consume) {
  const size_t unit_bytes = options.unit_bytes != 0 ? options.unit_bytes : kDefaultUnitBytes;
  UnitPlanner planner(view.streams, view.setup, view.config, unit_bytes, path, window.from_ns,
                      window.to_ns);
  std::vector<const CodeImages*> worker_images;
  for (const auto& image : images) worker_images.push_back(image.get());
  UnitDecoder decoder(view.setup, view.timeline, view.streams, std::move(worker_images), code,
                      options.walker, options.format == OutputFormat::kInsns);
  const unsigned jobs = static_cast<unsigned>(images.size());
  const size_t in_flight = 2 * static_cast<size_t>(jobs) + 2;
  std::vector<WorkUnit> plan(in_flight);  // unit i in plan[i % in_flight] (see RunOrdered)
  RunOrdered(
      jobs, in_flight, [&](size_t index) { return planner.Next(&plan[index % in_flight]); },
      [&](size_t index, unsigned worker, UnitEvents& out) {
        decoder.Decode(plan[index % in_flight], worker, out);
      },
      [&](size_t index, UnitEvents& events) {
        const WorkUnit& work = plan[index % in_flight];
        if (options.progress) options.progress(work.planned_bytes, planner.total_bytes());
        consume(index, work, events);
      });
  Decoded decoded{{}, decoder.units(), decoder.libipt_units()};
  for (size_t s = 0; s < view.streams.size(); ++s) decoded.planned.push_back(planner.planned(s));
  return decoded;
}

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
    summary.threads = view.streams.size();
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
  PTSCOPE_ASSIGN_OR_RETURN(
      OutputSink output,
      OpenOutput(SinkFormatOf(options.format),
                 options.count_only ? std::string() : options.output_path, namer, window));
  std::optional<OutputSink> summary_output;  // --summary-json: the same decode's summary
  if (!options.summary_json_path.empty() && !options.count_only) {
    PTSCOPE_ASSIGN_OR_RETURN(summary_output, OpenOutput(SinkFormat::kSummaryJson,
                                                        options.summary_json_path, namer, window));
  }
  const FeedSinks sinks{output.sink(), summary_output ? &summary_output->sink() : nullptr};
  ThreadAssembler assembler(archive, view.setup, view.timeline, view.streams, namer, sinks,
                            options.threads, summary);
  const Decoded decoded = DecodeUnits(
      view, window, archive.path, images, &namer, options,
      [&](size_t index, const WorkUnit& work, UnitEvents& events) {
        assembler.Consume(index, work, events);
      });
  assembler.Finish([&](size_t stream) { return decoded.planned[stream]; }, window.active);
  // A module nobody ran code of made no gap: it is not reported missing.
  summary.missing = images[0]->MissingThatRan(assembler.missing_code_ips());

  const bool outside = NoteWindow(window, options, summary);
  summary.stats[Stat::kWalkerFallbackUnits] = decoded.libipt_units;
  if (decoded.libipt_units != 0) {
    summary.notes.push_back(std::to_string(decoded.libipt_units) + " of " +
                            std::to_string(decoded.units) + " decode units hold trace the "
                            "walker does not model: libipt's block decoder walked them");
  }
  for (SliceSink* sink : {&sinks.output, sinks.summary}) {
    if (sink == nullptr) continue;
    sink->SetCaptureTotals(summary);
    sink->Finish();
    std::string output_error = sink->OutputError();
    if (!output_error.empty()) return Unexpected(Errc::kIo, output_error);
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
