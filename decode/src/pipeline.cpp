// Stage wiring (see pipeline.h).
#include "pipeline.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include "debuginfod_fetcher.h"
#include "decoder_setup.h"
#include "flow_decoder.h"
#include "frame_namer.h"
#include "insn_lister.h"
#include "sideband_timeline.h"
#include "sink/sink_factory.h"
#include "stack/stack_tracker.h"

namespace ptscope::decode {
namespace {

struct Segment {
  std::vector<uint8_t> bytes;
  std::string loss_before;  // non-empty: data was lost before this segment
};

struct ThreadStream {
  ThreadKey key;
  std::vector<Segment> segments;
  std::vector<TriggerMark> triggers;
};

// Groups per-thread PT pieces by stream, in stream_offset order, cut wherever data was lost.
std::vector<ThreadStream> CollectStreams(const format::Archive& archive,
                                         const SidebandTimeline& timeline,
                                         std::vector<std::string>& notes) {
  std::map<uint32_t, std::vector<const format::PtDataChunk*>> by_stream;
  bool per_cpu_noted = false;
  for (const format::PtDataChunk& piece : archive.pt_data) {
    if (piece.cpu != -1 && piece.tid == 0) {
      if (!per_cpu_noted) {
        notes.push_back("per-CPU PT streams are not decoded yet (only per-thread streams): "
                        "record with per-thread tracing");
        per_cpu_noted = true;
      }
      continue;
    }
    by_stream[piece.stream_id].push_back(&piece);
  }
  std::vector<ThreadStream> streams;
  for (auto& [stream_id, pieces] : by_stream) {
    std::stable_sort(pieces.begin(), pieces.end(), [](const auto* a, const auto* b) {
      return a->stream_offset < b->stream_offset;
    });
    ThreadStream stream;
    stream.key.tid = pieces.front()->tid;
    stream.key.pid = pieces.front()->pid != 0 ? pieces.front()->pid
                                              : timeline.PidOf(pieces.front()->tid);
    if (stream.key.pid == 0) stream.key.pid = stream.key.tid;
    const format::PtDataChunk* previous = nullptr;
    for (const format::PtDataChunk* piece : pieces) {
      std::string loss;
      if (previous != nullptr) {
        uint64_t expected = previous->stream_offset + previous->data.size();
        if (piece->snapshot_index != previous->snapshot_index) {
          loss = "snapshot " + std::to_string(piece->snapshot_index) +
                 " begins: execution between snapshots was not captured";
        } else if (piece->bytes_lost_before != 0 || piece->stream_offset > expected ||
                   (previous->flags & format::kPtTruncated) != 0) {
          uint64_t lost = piece->bytes_lost_before != 0
                              ? piece->bytes_lost_before
                              : (piece->stream_offset > expected ? piece->stream_offset - expected
                                                                 : 0);
          loss = std::to_string(lost) + " bytes of trace lost before stream offset " +
                 std::to_string(piece->stream_offset);
        }
      } else if (piece->bytes_lost_before != 0) {
        loss = std::to_string(piece->bytes_lost_before) + " bytes of trace lost before the start";
      }
      if (stream.segments.empty() || !loss.empty()) {
        stream.segments.push_back(Segment{{}, loss});
      }
      std::vector<uint8_t>& bytes = stream.segments.back().bytes;
      bytes.insert(bytes.end(), piece->data.begin(), piece->data.end());
      previous = piece;
    }
    streams.push_back(std::move(stream));
  }
  std::sort(streams.begin(), streams.end(), [](const ThreadStream& a, const ThreadStream& b) {
    return a.key.tid != b.key.tid ? a.key.tid < b.key.tid : a.key.pid < b.key.pid;
  });
  return streams;
}

void AttachTriggers(const format::Archive& archive, const DecoderSetup& setup,
                    std::vector<ThreadStream>& streams) {
  for (const format::MarkerChunk& marker : archive.markers) {
    if (marker.kind != format::MarkerKind::kTrigger) continue;
    for (ThreadStream& stream : streams) {
      if (marker.tid != 0 && marker.tid != stream.key.tid) continue;
      stream.triggers.push_back(
          TriggerMark{setup.time.ToNs(marker.tsc), marker.value, "trigger: " + marker.text});
    }
  }
  for (ThreadStream& stream : streams) {
    std::stable_sort(stream.triggers.begin(), stream.triggers.end(),
                     [](const TriggerMark& a, const TriggerMark& b) { return a.time_ns < b.time_ns; });
  }
}

// Collects one thread's FlowEvents (for parallel decoding) and counts symbolized instructions.
class CollectingOutput : public FlowOutput {
 public:
  CollectingOutput(ThreadKey key, SymbolsFrameNamer& namer, StackTracker* tracker)
      : key_(key), namer_(namer), tracker_(tracker) {}
  void OnFlowEvent(const FlowEvent& event) override {
    uint64_t where = event.from != 0 ? event.from : last_to_;
    if (event.insn_count != 0 && where != 0) {
      uint64_t page = where >> 12;
      if (page != cached_page_) {
        cached_page_ = page;
        cached_symbolized_ = namer_.InSymbolizedModule(key_.pid, where, event.time_ns);
      }
      if (cached_symbolized_) symbolized_ += event.insn_count;
    }
    if (event.to != 0) last_to_ = event.to;
    if (tracker_ != nullptr) {
      tracker_->OnEvent(event);
    } else {
      events_.push_back(event);
    }
  }
  std::vector<FlowEvent>& events() { return events_; }
  uint64_t symbolized() const { return symbolized_; }

 private:
  ThreadKey key_;
  SymbolsFrameNamer& namer_;
  StackTracker* tracker_;
  std::vector<FlowEvent> events_;
  uint64_t last_to_ = 0;
  uint64_t cached_page_ = UINT64_MAX;
  bool cached_symbolized_ = false;
  uint64_t symbolized_ = 0;
};

struct ThreadResult {
  FlowStats stats;
  uint64_t symbolized = 0;
  std::vector<FlowEvent> events;  // only when decoded in parallel
};

ThreadResult DecodeThreadFlow(const ThreadStream& stream, const DecoderSetup& setup,
                              const CodeImages& images, SymbolsFrameNamer& namer,
                              StackTracker* tracker) {
  CollectingOutput output(stream.key, namer, tracker);
  FlowDecoder decoder(setup, images, stream.key.pid, output);
  decoder.SetTriggers(stream.triggers);
  decoder.SetInlineNamer(&namer);
  for (const Segment& segment : stream.segments) {
    if (!segment.loss_before.empty()) decoder.LostData(segment.loss_before);
    decoder.DecodeSegment(segment.bytes.data(), segment.bytes.size());
  }
  decoder.Finish();
  return ThreadResult{decoder.stats(), output.symbolized(), std::move(output.events())};
}

void AddStats(const FlowStats& stats, const ThreadKey& key, DecodeSummary& summary) {
  summary.instructions += stats.instructions;
  for (size_t i = 0; i < stats.gaps.size(); ++i) summary.gaps[i] += stats.gaps[i];
  if (stats.events != 0) {
    summary.first_ns = std::min(summary.first_ns, stats.first_ns);
    summary.last_ns = std::max(summary.last_ns, stats.last_ns);
  }
  if (!stats.first_error.empty()) {
    summary.notes.push_back("thread " + std::to_string(key.tid) + ": first decode error: " +
                            stats.first_error);
  }
}

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

namespace {

Result<std::unique_ptr<SliceSink>> MakeSink(const PipelineOptions& options, FrameNamer& namer) {
  SinkFormat format = options.format == OutputFormat::kText     ? SinkFormat::kText
                      : options.format == OutputFormat::kFolded ? SinkFormat::kFolded
                                                                : SinkFormat::kPerfetto;
  return CreateSink(format, options.output_path, namer);
}

Result<DecodeSummary> RunInsns(const std::vector<ThreadStream>& streams, const DecoderSetup& setup,
                               const CodeImages& images, const PipelineOptions& options,
                               DecodeSummary summary) {
  const bool to_stdout = options.output_path == "-";
  std::FILE* file = to_stdout ? stdout : std::fopen(options.output_path.c_str(), "wb");
  if (file == nullptr) {
    return Unexpected(Errc::kIo, options.output_path + ": cannot create the output file (" +
                                     std::strerror(errno) + ")");
  }
  bool failed = false;
  {
    InsnWriter writer(file);
    for (size_t i = 0; i < streams.size(); ++i) {
      const ThreadStream& stream = streams[i];
      InsnLister lister(setup, images, stream.key.pid, stream.key.tid, writer);
      for (const Segment& segment : stream.segments) {
        if (!segment.loss_before.empty()) summary.gaps[static_cast<size_t>(GapCause::kLostData)]++;
        lister.DecodeSegment(segment.bytes.data(), segment.bytes.size());
      }
      summary.instructions += lister.instructions();
      summary.gaps[static_cast<size_t>(GapCause::kDecodeError)] += lister.errors();
      if (!lister.first_error().empty()) {
        summary.notes.push_back("thread " + std::to_string(stream.key.tid) +
                                ": first decode error: " + lister.first_error());
      }
      if (options.progress) options.progress(i + 1, streams.size());
    }
    writer.Flush();
    failed = writer.failed();
  }
  if ((to_stdout ? std::fflush(file) : std::fclose(file)) != 0 || failed) {
    return Unexpected(Errc::kIo, options.output_path + ": write failed (disk full?)");
  }
  return summary;
}

}  // namespace

Result<DecodeSummary> RunPipeline(const format::Archive& archive, const PipelineOptions& options) {
  PTSCOPE_ASSIGN_OR_RETURN(DecoderSetup setup, SetupFromMetadata(archive));
  DecodeSummary summary;
  summary.output_path = options.output_path;
  if (!setup.cpu_note.empty()) summary.notes.push_back(setup.cpu_note);
  SidebandTimeline timeline = SidebandTimeline::Build(archive);
  summary.notes.insert(summary.notes.end(), timeline.notes().begin(), timeline.notes().end());
  std::vector<ThreadStream> streams = CollectStreams(archive, timeline, summary.notes);
  if (streams.empty()) {
    return Unexpected(Errc::kNotFound,
                      archive.path + ": the archive holds no per-thread PT data to decode");
  }
  AttachTriggers(archive, setup, streams);
  summary.threads = streams.size();

  symbols::ModuleResolver resolver(options.symbol_dirs);
  for (const format::BlobChunk& blob : archive.blobs) PTSCOPE_TRY(resolver.AddBlob(blob));
  symbols::DebuginfodFetcher debuginfod =
      symbols::DebuginfodFetcher::FromEnvironment({options.debuginfod_urls, 30});
  if (debuginfod.enabled()) resolver.SetDebuginfod(&debuginfod);
  symbols::JitCodeStore jit = symbols::JitCodeStore::FromArchive(archive, summary.notes);
  CodeImages images(timeline.address_space(), resolver);
  if (!jit.empty()) images.SetJitCode(&jit);
  std::vector<uint32_t> pids;
  for (const ThreadStream& stream : streams) pids.push_back(stream.key.pid);
  images.Prepare(pids);
  summary.missing = images.missing();

  if (options.format == OutputFormat::kInsns) {
    PTSCOPE_ASSIGN_OR_RETURN(summary, RunInsns(streams, setup, images, options, std::move(summary)));
  } else {
    symbols::Symbolizer symbolizer;
    SymbolsFrameNamer namer(timeline.address_space(), resolver, symbolizer);
    if (!jit.empty()) namer.SetJitCode(&jit);
    PTSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<SliceSink> sink, MakeSink(options, namer));
    unsigned jobs = std::max(1u, std::min<unsigned>(options.jobs, streams.size()));
    std::vector<ThreadResult> results(streams.size());
    if (jobs > 1) {
      // Decoding (the expensive part) runs in parallel; stacks and the sink stay serial.
      std::atomic<size_t> next{0};
      std::atomic<size_t> done{0};
      std::vector<std::thread> workers;
      for (unsigned j = 0; j < jobs; ++j) {
        workers.emplace_back([&] {
          for (size_t i = next++; i < streams.size(); i = next++) {
            results[i] = DecodeThreadFlow(streams[i], setup, images, namer, nullptr);
            ++done;
          }
        });
      }
      for (std::thread& worker : workers) worker.join();
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      const ThreadKey& key = streams[i].key;
      sink->BeginThread(key, timeline.ProcessName(key.pid), timeline.ThreadName(key.tid));
      StackTracker tracker(key, namer, *sink);
      if (jobs > 1) {
        for (const FlowEvent& event : results[i].events) tracker.OnEvent(event);
        results[i].events = {};
      } else {
        results[i] = DecodeThreadFlow(streams[i], setup, images, namer, &tracker);
      }
      tracker.Finish(results[i].stats.last_ns);
      AddStats(results[i].stats, key, summary);
      summary.symbolized_instructions += results[i].symbolized;
      if (options.progress) options.progress(i + 1, streams.size());
    }
    sink->Finish();
    std::string output_error = sink->OutputError();
    if (!output_error.empty()) return Unexpected(Errc::kIo, output_error);
    for (const std::string& failure : symbolizer.failures()) {
      summary.notes.push_back("cannot load symbols: " + failure);
    }
    for (std::string& note : namer.UnsymbolizedNotes()) summary.notes.push_back(std::move(note));
  }
  summary.notes.insert(summary.notes.end(), resolver.notes().begin(), resolver.notes().end());
  return summary;
}

}  // namespace ptscope::decode
