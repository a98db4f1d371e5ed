// Stage wiring (see pipeline.h).
//
// Every contiguous piece of a PT stream is cut into decode units at PSBs (psb_units.h). Units are
// decoded on a worker pool, each by its own FlowDecoder over the shared image-section cache, into
// event buffers; the calling thread stitches them back in order (unit_pool.h) and feeds each
// thread's StackTracker, so the call stacks are exactly those of one sequential pass and the
// output is the same for every --jobs value. Per-thread streams are consumed as they complete
// (memory bounded by the window of units in flight); per-CPU streams are split into the runs of
// each thread by the context-switch sideband, and each thread's runs from all CPUs are put back
// in time order before its stack is tracked.
#include "pipeline.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include "debuginfod_fetcher.h"
#include "decoder_setup.h"
#include "flow_decoder.h"
#include "frame_namer.h"
#include "insn_listing.h"
#include "piece_reader.h"
#include "psb_units.h"
#include "sideband_timeline.h"
#include "sink/sink_factory.h"
#include "stack/stack_tracker.h"
#include "streams.h"
#include "unit_pool.h"
#include "window_sink.h"

namespace ptscope::decode {
namespace {

constexpr size_t kDefaultUnitBytes = 16 * 1024;

std::vector<TriggerMark> TriggersOf(const format::Archive& archive, const DecoderSetup& setup,
                                    uint32_t tid) {
  std::vector<TriggerMark> triggers;
  for (const format::MarkerChunk& marker : archive.markers) {
    if (marker.kind != format::MarkerKind::kTrigger) continue;
    if (marker.tid != 0 && marker.tid != tid) continue;
    triggers.push_back(
        TriggerMark{setup.time.ToNs(marker.tsc), marker.value, "trigger: " + marker.text});
  }
  std::stable_sort(triggers.begin(), triggers.end(),
                   [](const TriggerMark& a, const TriggerMark& b) { return a.time_ns < b.time_ns; });
  return triggers;
}

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

// One unit of work: a span of one piece of one stream.
struct WorkUnit {
  size_t stream = 0, piece = 0, unit = 0;
};

// Feeds one thread's stitched events to its StackTracker: triggers in time order among them,
// lost-data gaps between pieces, the end; counts instructions in modules with symbols.
class ThreadFeed {
 public:
  ThreadFeed(const ThreadKey& key, SymbolsFrameNamer& namer, SliceSink& sink,
             std::vector<TriggerMark> triggers)
      : key_(key), namer_(namer), tracker_(key, namer, sink), triggers_(std::move(triggers)) {}

  void Deliver(FlowEvent& event) {
    if (event.time_ns < last_ns_) event.time_ns = last_ns_;  // non-decreasing per thread
    DeliverDueTriggers(triggers_, &next_trigger_, event.time_ns, last_ns_,
                       [this](FlowEvent& trigger) { tracker_.OnEvent(trigger); });
    CountSymbolized(event);
    last_ns_ = event.time_ns;
    tracker_.OnEvent(event);
  }
  void Gap(GapCause cause, std::string detail, uint64_t insn_count) {
    FlowEvent gap;
    gap.kind = FlowEvent::Kind::kGap;
    gap.insn_count = insn_count;
    gap.gap_cause = cause;
    gap.time_ns = last_ns_;
    gap.detail = std::move(detail);
    Deliver(gap);
  }
  void AddStats(const FlowStats& stats) {
    stats_.instructions += stats.instructions;
    stats_.events += stats.events;
    for (size_t i = 0; i < stats.gaps.size(); ++i) stats_.gaps[i] += stats.gaps[i];
    stats_.first_ns = std::min(stats_.first_ns, stats.first_ns);
    stats_.last_ns = std::max(stats_.last_ns, stats.last_ns);
    if (stats_.first_error.empty()) stats_.first_error = stats.first_error;
  }
  void CountGap(GapCause cause) { stats_.gaps[static_cast<size_t>(cause)]++; }
  void Finish(uint64_t last_end_ip, uint64_t trailing_insns) {
    FlowEvent end;
    end.kind = FlowEvent::Kind::kEnd;
    end.from = last_end_ip;
    end.insn_count = trailing_insns;
    end.time_ns = last_ns_;
    Deliver(end);
    tracker_.Finish(std::max(stats_.last_ns == 0 ? 0 : stats_.last_ns, last_ns_));
  }
  const FlowStats& stats() const { return stats_; }
  uint64_t symbolized() const { return symbolized_; }
  const ThreadKey& key() const { return key_; }

 private:
  void CountSymbolized(const FlowEvent& event) {
    uint64_t where = event.from != 0 ? event.from : last_to_;
    if (event.insn_count != 0 && where != 0) {
      if (where < range_start_ || where >= range_end_) {  // the answer holds for a whole mapping
        cached_symbolized_ =
            namer_.InSymbolizedModule(key_.pid, where, event.time_ns, &range_start_, &range_end_);
      }
      if (cached_symbolized_) symbolized_ += event.insn_count;
    }
    if (event.to != 0) last_to_ = event.to;
  }

  ThreadKey key_;
  SymbolsFrameNamer& namer_;
  StackTracker tracker_;
  std::vector<TriggerMark> triggers_;
  size_t next_trigger_ = 0;
  uint64_t last_ns_ = 0;
  FlowStats stats_;
  uint64_t last_to_ = 0, range_start_ = 1, range_end_ = 0;
  bool cached_symbolized_ = false;
  uint64_t symbolized_ = 0;
};

void AddThreadToSummary(const ThreadFeed& feed, DecodeSummary& summary) {
  const FlowStats& stats = feed.stats();
  summary.instructions += stats.instructions;
  summary.symbolized_instructions += feed.symbolized();
  for (size_t i = 0; i < stats.gaps.size(); ++i) summary.gaps[i] += stats.gaps[i];
  if (stats.events != 0) {
    summary.first_ns = std::min(summary.first_ns, stats.first_ns);
    summary.last_ns = std::max(summary.last_ns, stats.last_ns);
  }
  if (!stats.first_error.empty()) {
    summary.notes.push_back("thread " + std::to_string(feed.key().tid) +
                            ": first decode error: " + stats.first_error);
  }
}

// Everything the decode stage shares (read-only while workers run, apart from the thread-safe
// namer and each worker's own cache).
struct DecodeContext {
  const DecoderSetup& setup;
  const CodeImages& images;
  const SidebandTimeline& timeline;
  SymbolsFrameNamer& namer;
  std::vector<Stream>& streams;
  std::vector<BlockInlineCache> worker_caches;
  std::vector<PieceReader> worker_readers;
};

void DecodeUnit(DecodeContext& context, const WorkUnit& work, unsigned worker, UnitEvents& out) {
  const Stream& stream = context.streams[work.stream];
  const Piece& piece = stream.pieces[work.piece];
  const DecodeUnitSpan& span = piece.units[work.unit];
  struct NoOutput : FlowOutput {
    void OnFlowEvent(const FlowEvent&) override {}
  } unused;
  FlowDecoder decoder(context.setup, context.images, stream.key.pid, unused);
  decoder.SetUnitBuffer(&out);
  decoder.SetInlineNamer(&context.namer);
  decoder.SetBlockInlineCache(&context.worker_caches[worker]);
  decoder.SetOffsetBase(span.begin);
  if (work.unit > 0) decoder.SetContinuation();
  if (work.unit + 1 < piece.units.size()) decoder.SetNextUnit(piece.units[work.unit + 1].start);
  if (stream.cpu >= 0) {
    decoder.FollowCpu(&context.timeline, static_cast<uint32_t>(stream.cpu));
  } else {
    out.runs.push_back(UnitEvents::Run{stream.key, 0});
  }
  Result<std::span<const uint8_t>> bytes =
      context.worker_readers[worker].Bytes(piece, span.begin, span.decode_end);
  if (!bytes) {
    decoder.FailSegment("cannot read the trace: " + bytes.error().message);
    return;
  }
  decoder.DecodeSegment(bytes->data(), bytes->size());
}

// Units to decode, in consumption order, after --threads and --time-range.
std::vector<WorkUnit> PlanUnits(std::vector<Stream>& streams, const DecoderSetup& setup,
                                const PipelineOptions& options, uint64_t window_from_ns,
                                uint64_t window_to_ns) {
  std::vector<WorkUnit> plan;
  for (size_t s = 0; s < streams.size(); ++s) {
    for (size_t p = 0; p < streams[s].pieces.size(); ++p) {
      const std::vector<DecodeUnitSpan>& units = streams[s].pieces[p].units;
      for (size_t u = 0; u < units.size(); ++u) {
        // A unit lies outside the window when it starts after its end, or when the next unit
        // (of the same piece) starts before its beginning. Without time, keep everything.
        uint64_t start_tsc = units[u].start.tsc;
        if (start_tsc != 0 && setup.time.ToNs(start_tsc) > window_to_ns) continue;
        if (u + 1 < units.size() && units[u + 1].start.tsc != 0 &&
            setup.time.ToNs(units[u + 1].start.tsc) < window_from_ns) {
          continue;
        }
        plan.push_back(WorkUnit{s, p, u});
      }
    }
  }
  (void)options;
  return plan;
}


Result<std::unique_ptr<SliceSink>> MakeSink(const PipelineOptions& options, FrameNamer& namer) {
  SinkFormat format = options.format == OutputFormat::kText      ? SinkFormat::kText
                      : options.format == OutputFormat::kFolded  ? SinkFormat::kFolded
                      : options.format == OutputFormat::kSummary ? SinkFormat::kSummary
                                                                 : SinkFormat::kPerfetto;
  return CreateSink(format, options.output_path, namer);
}

// One thread's run of events inside a per-CPU unit's buffer.
struct CpuRun {
  uint32_t tid = 0;
  uint64_t first_ns = 0;
  size_t plan_index = 0, first = 0, end = 0;
  uint32_t cpu = 0;
};

}  // namespace

const char* OutputFormatName(OutputFormat format) {
  switch (format) {
    case OutputFormat::kPerfetto: return "perfetto";
    case OutputFormat::kText: return "text";
    case OutputFormat::kFolded: return "folded";
    case OutputFormat::kInsns: return "insns";
    case OutputFormat::kSummary: return "summary";
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
  if (streams.empty()) {
    return Unexpected(Errc::kNotFound, archive.path + ": no traced thread or process matches --threads");
  }
  pt_config config;
  pt_config_init(&config);
  setup.Apply(config);
  const size_t unit_bytes = options.unit_bytes != 0 ? options.unit_bytes : kDefaultUnitBytes;
  uint64_t capture_start_ns = UINT64_MAX;
  auto split_reader = std::make_unique<PieceReader>(archive.path);  // freed after the split
  for (Stream& stream : streams) {
    for (Piece& piece : stream.pieces) {
      PTSCOPE_ASSIGN_OR_RETURN(piece.units,
                               SplitPieceAtPsb(*split_reader, piece, config, unit_bytes));
      if (!piece.units.empty() && piece.units.front().start.tsc != 0) {
        capture_start_ns = std::min(capture_start_ns, setup.time.ToNs(piece.units.front().start.tsc));
      }
    }
    if (stream.cpu < 0) stream.triggers = TriggersOf(archive, setup, stream.key.tid);
  }
  split_reader.reset();
  if (capture_start_ns == UINT64_MAX) capture_start_ns = 0;
  const bool windowed = options.time_from_ns != 0 || options.time_to_ns != UINT64_MAX;
  const uint64_t window_from = capture_start_ns + options.time_from_ns;
  const uint64_t window_to = options.time_to_ns == UINT64_MAX || options.time_to_ns > UINT64_MAX - capture_start_ns
                                 ? UINT64_MAX
                                 : capture_start_ns + options.time_to_ns;

  symbols::ModuleResolver resolver(options.symbol_dirs);
  for (const format::BlobChunk& blob : archive.blobs) PTSCOPE_TRY(resolver.AddBlob(blob));
  symbols::DebuginfodFetcher debuginfod =
      symbols::DebuginfodFetcher::FromEnvironment({options.debuginfod_urls, 30});
  if (debuginfod.enabled()) resolver.SetDebuginfod(&debuginfod);
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
  PTSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<SliceSink> output_sink, MakeSink(options, namer));
  std::unique_ptr<WindowSink> window_sink;
  if (windowed) window_sink = std::make_unique<WindowSink>(*output_sink, window_from, window_to);
  SliceSink& sink = windowed ? static_cast<SliceSink&>(*window_sink) : *output_sink;

  std::vector<WorkUnit> plan = PlanUnits(streams, setup, options, window_from, window_to);
  const unsigned jobs = std::max(1u, options.jobs);
  DecodeContext context{setup, images, timeline, namer, streams, {}, {}};
  context.worker_caches.resize(jobs);
  for (unsigned worker = 0; worker < jobs; ++worker) context.worker_readers.emplace_back(archive.path);
  const size_t window = 2 * static_cast<size_t>(jobs) + 2;

  // Consumption state for per-thread streams (plan order: stream, piece, unit).
  std::unique_ptr<ThreadFeed> feed;
  size_t feed_stream = SIZE_MAX, feed_piece = SIZE_MAX;
  uint64_t last_end_ip = 0;
  uint64_t carried_insns = 0;  // instructions after a unit's last event (per-thread streams)
  auto finish_feed = [&] {
    if (!feed) return;
    feed->Finish(last_end_ip, carried_insns);
    carried_insns = 0;
    AddThreadToSummary(*feed, summary);
    ++summary.threads;
    feed.reset();
  };
  // Per-CPU streams: kept until every unit is decoded, then regrouped by thread.
  std::map<size_t, UnitEvents> cpu_units;
  std::vector<CpuRun> cpu_runs;
  std::map<uint32_t, ThreadKey> cpu_threads;
  uint64_t idle_instructions = 0;
  uint64_t cpu_carried_insns = 0;  // a per-CPU unit's trailing instructions, for the next unit

  // The previous consumed unit's end state, for the inlined-depth restatement at a join.
  struct JoinState {
    bool valid = false;
    WorkUnit work;
    UnitEvents end;  // only the end_* fields are used
  } previous;
  auto consume = [&](size_t index, UnitEvents& events) {
    const WorkUnit& work = plan[index];
    Stream& stream = streams[work.stream];
    bool follows = previous.valid && previous.work.stream == work.stream &&
                   previous.work.piece == work.piece && previous.work.unit + 1 == work.unit;
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
    previous.work = work;
    previous.end.end_inline_depth = events.end_inline_depth;
    previous.end.end_after_transfer = events.end_after_transfer;
    if (options.progress) options.progress(index + 1, plan.size());
    if (stream.cpu >= 0) {
      // As for a thread's stream: instructions retired before the join count in the first event
      // after it (the CPU's thread does not change at a PSB), or they would be lost.
      if (follows) CarryInstructions(events, cpu_carried_insns);
      cpu_carried_insns = events.trailing_insns;
      for (size_t r = 0; r < events.runs.size(); ++r) {
        const UnitEvents::Run& run = events.runs[r];
        size_t end = r + 1 < events.runs.size() ? events.runs[r + 1].first : events.events.size();
        if (run.first >= end) continue;
        if (run.thread.tid == 0 || !Selected(options.threads, run.thread)) {
          for (size_t e = run.first; e < end; ++e) idle_instructions += events.events[e].insn_count;
          continue;
        }
        cpu_threads[run.thread.tid] = run.thread;
        cpu_runs.push_back(CpuRun{run.thread.tid, events.events[run.first].time_ns, index,
                                  run.first, end, static_cast<uint32_t>(stream.cpu)});
      }
      cpu_units.emplace(index, std::move(events));
      return;
    }
    if (work.stream != feed_stream) {
      finish_feed();
      feed_stream = work.stream;
      feed_piece = SIZE_MAX;
      sink.BeginThread(stream.key, timeline.ProcessName(stream.key.pid),
                       timeline.ThreadName(stream.key.tid));
      feed = std::make_unique<ThreadFeed>(stream.key, namer, sink, stream.triggers);
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
    for (size_t e = 0; e < events.events.size(); ++e) {
      if (e != events.restate_index) feed->Deliver(events.events[e]);
    }
    last_end_ip = events.last_end_ip;
  };
  RunOrdered(plan.size(), jobs, window,
             [&](size_t index, unsigned worker, UnitEvents& out) {
               DecodeUnit(context, plan[index], worker, out);
             },
             consume);
  finish_feed();
  // Pieces without a single PSB decode to nothing: say so, and keep the track of a thread none of
  // whose trace was decodable, with its gaps.
  for (size_t s = 0; s < streams.size(); ++s) {
    const Stream& stream = streams[s];
    bool decoded = false;
    for (const WorkUnit& work : plan) decoded = decoded || work.stream == s;
    std::unique_ptr<ThreadFeed> empty;
    if (!decoded && stream.cpu < 0 && !windowed) {
      sink.BeginThread(stream.key, timeline.ProcessName(stream.key.pid),
                       timeline.ThreadName(stream.key.tid));
      empty = std::make_unique<ThreadFeed>(stream.key, namer, sink, std::vector<TriggerMark>{});
      ++summary.threads;
    }
    for (const Piece& piece : stream.pieces) {
      if (empty && !piece.loss_before.empty()) {
        empty->Gap(GapCause::kLostData, piece.loss_before, 0);
        summary.gaps[static_cast<size_t>(GapCause::kLostData)]++;
      }
      if (!piece.units.empty() || piece.size == 0) continue;
      std::string detail = "no PSB in " + std::to_string(piece.size) +
                           " bytes of trace: nothing to decode";
      summary.gaps[static_cast<size_t>(GapCause::kDecodeError)]++;
      if (empty) empty->Gap(GapCause::kDecodeError, detail, 0);
      summary.notes.push_back(StreamName(stream) + ": " + detail);
    }
    if (empty) empty->Finish(0, 0);
  }

  if (!cpu_runs.empty()) {
    std::stable_sort(cpu_runs.begin(), cpu_runs.end(), [](const CpuRun& a, const CpuRun& b) {
      return a.first_ns != b.first_ns ? a.first_ns < b.first_ns : a.plan_index < b.plan_index;
    });
    for (const auto& [tid, key] : cpu_threads) {
      sink.BeginThread(key, timeline.ProcessName(key.pid), timeline.ThreadName(key.tid));
      ThreadFeed thread_feed(key, namer, sink, TriggersOf(archive, setup, key.tid));
      uint64_t end_ip = 0;
      for (const CpuRun& run : cpu_runs) {
        if (run.tid != tid) continue;
        UnitEvents& events = cpu_units.at(run.plan_index);
        for (size_t e = run.first; e < run.end; ++e) {
          if (e != events.restate_index) thread_feed.Deliver(events.events[e]);
        }
        end_ip = events.events[run.end - 1].from;
      }
      thread_feed.Finish(end_ip, 0);
      AddThreadToSummary(thread_feed, summary);
      ++summary.threads;
    }
    // Instructions and gaps of per-CPU units count once, whoever ran them.
    for (const auto& [index, events] : cpu_units) {
      summary.instructions += events.stats.instructions;
      for (size_t i = 0; i < events.stats.gaps.size(); ++i) summary.gaps[i] += events.stats.gaps[i];
      if (events.stats.events != 0) {
        summary.first_ns = std::min(summary.first_ns, events.stats.first_ns);
        summary.last_ns = std::max(summary.last_ns, events.stats.last_ns);
      }
      if (!events.stats.first_error.empty()) {
        summary.notes.push_back(StreamName(streams[plan[index].stream]) +
                                ": decode error: " + events.stats.first_error);
      }
    }
  }
  if (windowed) {
    // The counts above are of the decoded units (those overlapping the window); say what the
    // output holds, and when the window misses the capture altogether.
    uint64_t span = summary.last_ns > capture_start_ns ? summary.last_ns - capture_start_ns : 0;
    std::string to = options.time_to_ns == UINT64_MAX ? "the end" : std::to_string(options.time_to_ns) + " ns";
    summary.notes.push_back("--time-range: slices from " + std::to_string(options.time_from_ns) +
                            " ns to " + to + " after the capture start (the capture spans " +
                            std::to_string(span) + " ns); instructions counted in the decode "
                            "units that overlap it");
    if (options.time_from_ns > span || (options.time_to_ns != UINT64_MAX &&
                                        capture_start_ns + options.time_to_ns < summary.first_ns)) {
      summary.notes.push_back("--time-range lies outside the capture: the output holds no slices");
    }
  }
  if (idle_instructions != 0) {
    summary.notes.push_back(std::to_string(idle_instructions) +
                            " instructions of per-CPU trace ran while the sideband names no "
                            "(selected) thread on that CPU: not attributed");
  }
  sink.Finish();
  std::string output_error = sink.OutputError();
  if (!output_error.empty()) return Unexpected(Errc::kIo, output_error);
  for (const std::string& failure : symbolizer.failures()) {
    summary.notes.push_back("cannot load symbols: " + failure);
  }
  for (std::string& note : namer.UnsymbolizedNotes()) summary.notes.push_back(std::move(note));
  summary.notes.insert(summary.notes.end(), resolver.notes().begin(), resolver.notes().end());
  return summary;
}

}  // namespace ptscope::decode
