// Stage wiring: RunPipeline (ptscope/decode.h).
//
// Every contiguous piece of a PT stream is cut into decode units at PSBs (psb_units.h), as the
// workers ask for them (unit_planner.h), so that planning overlaps decoding. Units are decoded on
// a worker pool, each by its own FlowDecoder over its worker's image-section cache, into event
// buffers; the calling thread stitches them back in order (unit_pool.h) and feeds each thread's
// StackTracker, so the call stacks are exactly those of one sequential pass and the output
// is the same for every --jobs value. Per-thread streams are consumed as they complete (memory
// bounded by the window of units in flight); per-CPU streams are split into the runs of each thread
// by the context-switch sideband, their units consumed in start-time order across CPUs, and each
// thread's runs from all CPUs delivered in time order as soon as no later unit can hold an earlier
// one (cpu_threads.h), so they are not held until the end either.
#include "ptscope/decode.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "join/cpu_threads.h"
#include "ptscope/symbols.h"
#include "capture/decoder_setup.h"
#include "flow/flow_decoder.h"
#include "names/capture_resolver.h"
#include "names/frame_namer.h"
#include "listing/insn_listing.h"
#include "parallel/psb_units.h"
#include "capture/selection.h"
#include "capture/sideband_timeline.h"
#include "sink/null_sink.h"
#include "sink/sink_factory.h"
#include "stack/stack_tracker.h"
#include "capture/streams.h"
#include "join/thread_feed.h"
#include "parallel/unit_planner.h"
#include "parallel/unit_pool.h"
#include "sink/window_sink.h"

namespace ptscope::decode {
namespace {

constexpr size_t kDefaultUnitBytes = 16 * 1024;

// Instructions retired after the previous unit's last event count in the first delivered event
// after the join (FlowEvent::insn_count), as in one sequential pass.
void CarryInstructions(UnitEvents& events, uint64_t carried) {
  size_t first = events.restate_index == 0 ? 1 : 0;
  if (first < events.events.size()) {
    events.events[first].insn_count += carried;
  } else {
    events.trailing_insns += carried;
  }
}

// Everything the decode stage shares (read-only while workers run, apart from the thread-safe
// namer and each worker's own cache).
struct DecodeContext {
  const DecoderSetup& setup;
  std::vector<const CodeImages*> worker_images;  // see RunPipeline
  const SidebandTimeline& timeline;
  CodeFacts& code;
  std::vector<Stream>& streams;
  std::vector<BlockInlineCache> worker_caches;
  std::vector<WalkerCache> walker_caches;  // empty: libipt's block decoder walks the code
  std::atomic<uint64_t> units{0}, libipt_units{0};  // units decoded; those the walker refused
};

// One attempt at a unit: with the worker's QueryWalker when `walker` is set, else with libipt's
// block decoder. Returns false when the walker refused the unit's trace.
bool DecodeUnitWith(DecodeContext& context, const WorkUnit& work, unsigned worker, bool walker,
                    UnitEvents& out) {
  const Stream& stream = context.streams[work.stream];
  const DecodeUnitSpan& span = work.span;
  struct NoOutput : FlowOutput {
    void OnFlowEvent(const FlowEvent&) override {}
  } unused;
  FlowDecoder decoder(context.setup, *context.worker_images[worker], stream.key.pid, unused);
  decoder.SetUnitBuffer(&out);
  decoder.SetCodeFacts(&context.code);
  decoder.SetBlockInlineCache(&context.worker_caches[worker]);
  if (walker) decoder.UseWalker(&context.walker_caches[worker]);
  decoder.SetOffsetBase(span.begin);
  if (work.unit > 0) decoder.SetContinuation();
  if (work.has_next) decoder.SetNextUnit(work.next_start);
  if (stream.cpu >= 0) {
    decoder.FollowCpu(&context.timeline, static_cast<uint32_t>(stream.cpu));
  } else {
    out.runs.push_back(UnitEvents::Run{stream.key, 0});
  }
  if (!work.unreadable.empty()) {
    decoder.FailSegment(work.unreadable);
    return true;
  }
  decoder.DecodeSegment(work.bytes.data(), work.bytes.size());
  return !decoder.walker_refused();
}

void DecodeUnit(DecodeContext& context, const WorkUnit& work, unsigned worker, UnitEvents& out) {
  const bool walker = !context.walker_caches.empty();
  context.units.fetch_add(1, std::memory_order_relaxed);
  if (DecodeUnitWith(context, work, worker, walker, out) || !walker) return;
  context.libipt_units.fetch_add(1, std::memory_order_relaxed);
  // Trace the walker does not model (see query_walker.h): the whole unit again with libipt
  // (units are independent, so nothing of the first attempt is kept).
  out.Reset();
  DecodeUnitWith(context, work, worker, false, out);
}

SinkFormat SinkFormatOf(OutputFormat format) {
  return format == OutputFormat::kText          ? SinkFormat::kText
         : format == OutputFormat::kFolded      ? SinkFormat::kFolded
         : format == OutputFormat::kSummary     ? SinkFormat::kSummary
         : format == OutputFormat::kSummaryJson ? SinkFormat::kSummaryJson
                                                : SinkFormat::kPerfetto;
}

// One output file's sink, behind the --time-range window when there is one.
struct OutputSink {
  std::unique_ptr<SliceSink> file;
  std::unique_ptr<WindowSink> window;
  SliceSink& sink() { return window ? *window : *file; }
};

// An empty path: a sink that keeps nothing (PipelineOptions::count_only).
Result<OutputSink> OpenOutput(SinkFormat format, const std::string& path, FrameNamer& namer,
                              bool windowed, uint64_t from_ns, uint64_t to_ns) {
  OutputSink output;
  if (path.empty()) {
    output.file = std::make_unique<NullSink>();
  } else {
    PTSCOPE_ASSIGN_OR_RETURN(output.file, CreateSink(format, path, namer));
  }
  if (windowed) output.window = std::make_unique<WindowSink>(*output.file, from_ns, to_ns);
  return output;
}

}  // namespace

const char* OutputFormatName(OutputFormat format) {
  switch (format) {
    case OutputFormat::kPerfetto: return "perfetto";
    case OutputFormat::kText: return "text";
    case OutputFormat::kFolded: return "folded";
    case OutputFormat::kInsns: return "insns";
    case OutputFormat::kSummary: return "summary";
    case OutputFormat::kSummaryJson: return "summary-json";
  }
  return "?";
}

Result<DecodeSummary> RunPipeline(format::Archive& archive, const PipelineOptions& options) {
  PTSCOPE_ASSIGN_OR_RETURN(DecoderSetup setup, SetupFromMetadata(archive));
  DecodeSummary summary;
  summary.output_path = options.output_path;
  if (!setup.cpu_note.empty()) summary.notes.push_back(setup.cpu_note);
  SidebandTimeline timeline = SidebandTimeline::Build(archive);
  summary.notes.insert(summary.notes.end(), timeline.notes().begin(), timeline.notes().end());
  std::vector<Stream> streams = CollectStreams(archive, timeline);
  if (streams.empty()) {
    return Unexpected(Errc::kNotFound, archive.path + ": the archive holds no PT data to decode");
  }
  std::erase_if(streams, [&](const Stream& stream) {
    return stream.cpu < 0 && !Selected(options.threads, stream.key);
  });
  if (!SelectsAny(options.threads, streams, timeline)) {
    // Say what there is: every thread's name and instructions, from a decode of them all.
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
  pt_config config;
  pt_config_init(&config);
  setup.Apply(config);
  const size_t unit_bytes = options.unit_bytes != 0 ? options.unit_bytes : kDefaultUnitBytes;
  for (Stream& stream : streams) {
    if (stream.cpu < 0) stream.triggers = TriggersOf(archive, setup, stream.key.tid);
  }
  const bool windowed = options.time_from_ns != 0 || options.time_to_ns != UINT64_MAX;
  // Only a window needs the capture's start before decoding (the units are found as they are
  // decoded: see unit_planner.h).
  const uint64_t capture_start_ns =
      windowed ? CaptureStartNs(streams, setup, config, archive.path) : 0;
  const uint64_t window_from = capture_start_ns + options.time_from_ns;
  const uint64_t window_to = options.time_to_ns == UINT64_MAX || options.time_to_ns > UINT64_MAX - capture_start_ns
                                 ? UINT64_MAX
                                 : capture_start_ns + options.time_to_ns;

  CaptureResolver capture_resolver(options);
  PTSCOPE_TRY(capture_resolver.AddArchiveBlobs(archive));
  symbols::ModuleResolver& resolver = capture_resolver.resolver();
  symbols::JitCodeStore jit = symbols::JitCodeStore::FromArchive(archive, summary.notes);
  CodeImages images(timeline.address_space(), resolver);
  if (!jit.empty()) images.SetJitCode(&jit);
  std::vector<uint32_t> pids;
  for (const Stream& stream : streams) {
    if (stream.cpu < 0) pids.push_back(stream.key.pid);
  }
  for (uint32_t pid : timeline.ScheduledPids()) pids.push_back(pid);
  images.Prepare(pids);
  summary.missing = images.missing();

  if (options.format == OutputFormat::kInsns) {
    if (!options.summary_json_path.empty()) {
      return Unexpected(Errc::kInvalidArgument, "an instruction listing has no call slices to "
                                                "summarize: --summary-json needs another format");
    }
    summary.threads = streams.size();
    PTSCOPE_ASSIGN_OR_RETURN(
        summary, RunInsns(streams, archive.path, setup, images, timeline, options,
                          std::move(summary)));
    summary.notes.insert(summary.notes.end(), resolver.notes().begin(), resolver.notes().end());
    return summary;
  }

  symbols::Symbolizer symbolizer;
  SymbolsFrameNamer namer(timeline.address_space(), resolver, symbolizer);
  if (!jit.empty()) namer.SetJitCode(&jit);
  PTSCOPE_ASSIGN_OR_RETURN(OutputSink output,
                           OpenOutput(SinkFormatOf(options.format),
                                      options.count_only ? std::string() : options.output_path,
                                      namer, windowed, window_from, window_to));
  std::optional<OutputSink> summary_output;  // --summary-json: the same decode's summary
  if (!options.summary_json_path.empty() && !options.count_only) {
    PTSCOPE_ASSIGN_OR_RETURN(summary_output, OpenOutput(SinkFormat::kSummaryJson,
                                                        options.summary_json_path, namer,
                                                        windowed, window_from, window_to));
  }
  const FeedSinks sinks{output.sink(), summary_output ? &summary_output->sink() : nullptr};

  UnitPlanner planner(streams, setup, config, unit_bytes, archive.path, window_from, window_to);
  const unsigned jobs = std::max(1u, options.jobs);
  DecodeContext context{setup, {&images}, timeline, namer, streams, {}, {}};
  // One section cache per worker. libipt maps and unmaps a section, under that section's mutex
  // and its cache's, for every instruction it decodes outside its block cache (on the way to
  // each syscall and event); with one cache shared by all workers those locks and the block
  // cache's lines bounced between cores, and --jobs 2 spent about 10% more CPU than with a cache
  // per worker (same output). Each worker's cache still serves all the units it decodes.
  std::vector<std::unique_ptr<CodeImages>> more_images;
  for (unsigned worker = 1; worker < jobs; ++worker) {
    more_images.push_back(std::make_unique<CodeImages>(timeline.address_space(), resolver));
    if (!jit.empty()) more_images.back()->SetJitCode(&jit);
    more_images.back()->Prepare(pids);
    context.worker_images.push_back(more_images.back().get());
  }
  context.worker_caches.resize(jobs);
  if (options.walker) context.walker_caches.resize(jobs);
  const size_t window = 2 * static_cast<size_t>(jobs) + 2;
  std::vector<WorkUnit> plan(window);  // unit i in plan[i % window] (see RunOrdered)

  // Consumption state for per-thread streams (plan order: stream, piece, unit).
  std::unique_ptr<ThreadFeed> feed;
  size_t feed_stream = SIZE_MAX, feed_piece = SIZE_MAX;
  uint64_t last_end_ip = 0, last_end_ns = 0;
  uint64_t carried_insns = 0;  // instructions after a unit's last event (per-thread streams)
  auto finish_feed = [&] {
    if (!feed) return;
    feed->Finish(last_end_ip, carried_insns, last_end_ns);
    carried_insns = 0;
    AddThreadToSummary(*feed, summary);
    ++summary.threads;
    feed.reset();
  };
  // Per-CPU streams: their threads are delivered as the units come (see cpu_threads.h).
  CpuThreads cpu_threads(archive, setup, timeline, namer, sinks, options.threads);

  // Each stream's last consumed unit and its end state: the inlined-depth restatement and the
  // carried instructions at a join (per-CPU units of several streams interleave).
  struct JoinState {
    bool valid = false;
    size_t piece = 0, unit = 0;  // of the unit
    UnitEvents end;              // only the end_* fields are used
    uint64_t trailing_insns = 0;  // per-CPU units: for the next unit of the piece
  };
  std::vector<JoinState> last_of_stream(streams.size());
  std::set<uint64_t> missing_code_ips;  // of every unit: which missing modules ran
  auto consume = [&](size_t index, UnitEvents& events) {
    const WorkUnit& work = plan[index % window];
    if (missing_code_ips.size() < 4096) {
      missing_code_ips.insert(events.stats.missing_code_ips.begin(),
                              events.stats.missing_code_ips.end());
    }
    Stream& stream = streams[work.stream];
    JoinState& previous = last_of_stream[work.stream];
    bool follows = previous.valid && previous.piece == work.piece && previous.unit + 1 == work.unit;
    if (events.restate_index != SIZE_MAX &&
        KeepRestatement(follows ? &previous.end : nullptr, events)) {
      events.restate_index = SIZE_MAX;  // a sequential decoder states it too: keep it
    }
    if (events.restate_index != SIZE_MAX) {
      // The skipped event's instructions count in the next one.
      uint64_t count = events.events[events.restate_index].insn_count;
      if (events.restate_index + 1 < events.events.size()) {
        events.events[events.restate_index + 1].insn_count += count;
      } else {
        events.trailing_insns += count;
      }
    }
    previous.valid = true;
    previous.piece = work.piece;
    previous.unit = work.unit;
    previous.end.end_inline_depth = events.end_inline_depth;
    previous.end.end_after_transfer = events.end_after_transfer;
    previous.end.end_stretch = events.end_stretch;
    previous.end.end_depth_unknown = events.end_depth_unknown;
    if (options.progress) options.progress(work.planned_bytes, planner.total_bytes());
    if (stream.cpu >= 0) {
      finish_feed();  // the per-thread streams all came first
      // As for a thread's stream: instructions retired before the join count in the first event
      // after it (the CPU's thread does not change at a PSB), or they would be lost.
      if (follows) CarryInstructions(events, previous.trailing_insns);
      previous.trailing_insns = events.trailing_insns;
      cpu_threads.Consume(index, StreamName(stream), events);
      cpu_threads.Release(work.following_start_ns);
      return;
    }
    if (work.stream != feed_stream) {
      finish_feed();
      feed_stream = work.stream;
      feed_piece = SIZE_MAX;
      sinks.BeginThread(stream.key, timeline.ProcessName(stream.key.pid),
                        timeline.ThreadName(stream.key.tid));
      feed = std::make_unique<ThreadFeed>(stream.key, namer, sinks, stream.triggers);
    }
    if (work.piece != feed_piece) {
      feed_piece = work.piece;
      const Piece& piece = stream.pieces[work.piece];
      if (!piece.loss_before.empty()) {
        feed->CountGap(GapCause::kLostData);
        feed->Gap(GapCause::kLostData, piece.loss_before, carried_insns);
        carried_insns = 0;
      }
    }
    feed->AddStats(events.stats);
    if (follows) CarryInstructions(events, carried_insns);
    carried_insns = events.trailing_insns;
    // By address: an index would cost a division by sizeof(FlowEvent) per event for size().
    const FlowEvent* skip = events.restate_index < events.events.size()
                                ? &events.events[events.restate_index]
                                : nullptr;
    feed->DeliverRun(events.events, skip);
    last_end_ip = events.last_end_ip;
    last_end_ns = events.end_ns;
  };
  RunOrdered(jobs, window, [&](size_t index) { return planner.Next(&plan[index % window]); },
             [&](size_t index, unsigned worker, UnitEvents& out) {
               DecodeUnit(context, plan[index % window], worker, out);
             },
             consume);
  finish_feed();
  // Pieces without a single PSB decode to nothing: say so, and keep the track of a thread none of
  // whose trace was decodable, with its gaps.
  for (size_t s = 0; s < streams.size(); ++s) {
    const Stream& stream = streams[s];
    const bool decoded = planner.planned(s);
    std::unique_ptr<ThreadFeed> empty;
    if (!decoded && stream.cpu < 0 && !windowed) {
      sinks.BeginThread(stream.key, timeline.ProcessName(stream.key.pid),
                        timeline.ThreadName(stream.key.tid));
      empty = std::make_unique<ThreadFeed>(stream.key, namer, sinks, std::vector<TriggerMark>{});
      ++summary.threads;
      ThreadCount count;
      count.pid = stream.key.pid;
      count.tid = stream.key.tid;
      summary.per_thread.push_back(count);
    }
    for (const Piece& piece : stream.pieces) {
      if (empty && !piece.loss_before.empty()) {
        empty->Gap(GapCause::kLostData, piece.loss_before, 0);
        summary.stats[Stat::kLostDataGaps]++;
      }
      if (piece.has_psb || piece.size == 0) continue;
      std::string detail = "no PSB in " + std::to_string(piece.size) +
                           " bytes of trace: nothing to decode";
      summary.stats[Stat::kDecodeErrorGaps]++;
      if (empty) empty->Gap(GapCause::kDecodeError, detail, 0);
      summary.notes.push_back(StreamName(stream) + ": " + detail);
    }
    if (empty) empty->Finish(0, 0);
  }

  cpu_threads.Finish(summary);
  // A module nobody ran code of made no gap: it is not reported missing.
  summary.missing = images.MissingThatRan({missing_code_ips.begin(), missing_code_ips.end()});
  // The window misses the capture altogether: an error that says what the capture spans.
  const uint64_t span = summary.last_ns > capture_start_ns ? summary.last_ns - capture_start_ns : 0;
  // (Only when something was decoded: a capture without a timestamp has no span to miss.)
  const bool outside = windowed && summary.first_ns != UINT64_MAX &&
                       (options.time_from_ns > span ||
                                    (options.time_to_ns != UINT64_MAX &&
                                     capture_start_ns + options.time_to_ns < summary.first_ns));
  if (windowed && !outside) {
    // The counts above are of the decoded units (those overlapping the window); say what the
    // output holds.
    std::string to = options.time_to_ns == UINT64_MAX ? "the end" : std::to_string(options.time_to_ns) + " ns";
    summary.notes.push_back("--time-range: slices from " + std::to_string(options.time_from_ns) +
                            " ns to " + to + " after the capture start (the capture spans " +
                            std::to_string(span) + " ns); instructions counted in the decode "
                            "units that overlap it");
  }
  summary.stats[Stat::kWalkerFallbackUnits] = context.libipt_units;
  if (context.libipt_units != 0) {
    summary.notes.push_back(std::to_string(context.libipt_units) + " of " +
                            std::to_string(context.units) + " decode units hold trace the "
                            "walker does not model: libipt's block decoder walked them");
  }
  for (SliceSink* sink : {&sinks.output, sinks.summary}) {
    if (sink == nullptr) continue;
    sink->SetCaptureTotals(summary);
    sink->Finish();
    std::string output_error = sink->OutputError();
    if (!output_error.empty()) return Unexpected(Errc::kIo, output_error);
  }
  if (outside) {
    for (const std::string& path : {options.output_path, options.summary_json_path}) {
      if (!options.count_only && !path.empty() && path != "-") std::remove(path.c_str());
    }
    return WindowOutsideCapture(archive.path, options.time_from_ns, options.time_to_ns, span);
  }
  for (ThreadCount& thread : summary.per_thread) {
    thread.process = timeline.ProcessName(thread.pid);
    thread.thread = timeline.ThreadName(thread.tid);
  }
  for (const std::string& failure : symbolizer.failures()) {
    summary.notes.push_back("cannot load symbols: " + failure);
  }
  for (std::string& note : namer.UnsymbolizedNotes()) summary.notes.push_back(std::move(note));
  summary.notes.insert(summary.notes.end(), resolver.notes().begin(), resolver.notes().end());
  return summary;
}

}  // namespace ptscope::decode
