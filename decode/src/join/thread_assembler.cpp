// The join stage (see thread_assembler.h).
#include "join/thread_assembler.h"

#include <memory>
#include <string>

namespace ptscope::decode {
namespace {
// Held-back records kept as SliceRecords per tracker: 2^15 of 32 bytes, 1 MiB (the bound on
// held-back records, StackTrackerOptions::max_buffered_events, is 32 times that). Past it they
// go to the RecordSpill in blocks of that many.
constexpr size_t kResidentRecords = size_t{1} << 15;
// What the RecordSpill keeps in memory, all threads together, before it uses its file: 3 blocks
// as they are (no copy, no encoding: the cheapest; 3 MiB), and no encoded ones: past those
// blocks, held-back records go to the file encoded (about 3.4 bytes a record, 9 times fewer
// bytes than as SliceRecords). So peak memory stays flat however long the capture and however
// many threads wait at once: a 2-thread recursion of 430 K calls held 31 blocks at once, and
// with 12 MiB of raw and 12 MiB of encoded blocks kept here its peak grew from 28 to 37 MB over
// a 10x longer capture (from 28.3 to 29.2 MB as set; 1 MiB of encoded blocks: to 29.7). The
// most synth-100M holds at once is 6 blocks: 3 of them stay as they are.
constexpr size_t kSpillRawBytes = 3 * kResidentRecords * sizeof(SliceRecord);
constexpr size_t kSpillEncodedBytes = 0;

// A speculating tracker's sink: it flushes nothing (StackTracker::Speculate).
class UnusedSink : public SliceSink {
 public:
  void BeginThread(const ThreadKey&, const std::string&, const std::string&) override {}
  void Begin(const ThreadKey&, uint64_t, const FrameId&, bool) override {}
  void End(const ThreadKey&, uint64_t) override {}
  void Instant(const ThreadKey&, uint64_t, const std::string&) override {}
  void Finish() override {}
};

StackTrackerOptions TrackerOptions(RecordSpill* spill) {
  StackTrackerOptions options;
  options.spill = spill;
  return options;
}
}  // namespace

ThreadAssembler::ThreadAssembler(const format::Archive& archive, const DecoderSetup& setup,
                                 const SidebandTimeline& timeline, std::vector<Stream>& streams,
                                 CodeFacts& code, const FeedSinks& sinks,
                                 const std::vector<uint32_t>& selected, DecodeSummary& summary,
                                 unsigned jobs, size_t in_flight)
    : timeline_(timeline),
      streams_(streams),
      code_(code),
      sinks_(sinks),
      joins_(streams.size()),
      summary_(summary),
      spill_(kResidentRecords, kSpillRawBytes, kSpillEncodedBytes),
      tracker_options_(TrackerOptions(&spill_)),
      cpu_threads_(archive, setup, timeline, code, sinks, selected, tracker_options_) {
  // One worker gains nothing: its tracker would run beside the join's, on the same thread. A
  // summary sink has a tracker of its own per thread (ThreadFeed), which is not speculated on.
  if (jobs > 1 && in_flight > 0 && sinks.summary == nullptr) {
    speculations_.resize(in_flight);
    worker_trackers_.resize(jobs);
  }
}

void ThreadAssembler::Speculate(size_t index, const WorkUnit& work, unsigned worker,
                                const UnitEvents& events) {
  if (speculations_.empty()) return;
  StackTracker::Speculation& spec = speculations_[index % speculations_.size()];
  const Stream& stream = streams_[work.stream];
  if (stream.cpu >= 0 || events.runs.size() > 1 || events.events.empty()) {
    spec.Clear();
    return;
  }
  WorkerTracker& own = worker_trackers_[worker];
  if (!own.tracker || own.pid != stream.key.pid) {
    own.sink = std::make_unique<UnusedSink>();
    own.tracker = std::make_unique<StackTracker>(stream.key, code_, *own.sink, tracker_options_);
    own.pid = stream.key.pid;
  }
  own.tracker->Speculate(events.events, spec);
}

void ThreadAssembler::BeginThread(const Stream& stream) {
  sinks_.BeginThread(stream.key, timeline_.ProcessName(stream.key.pid),
                    timeline_.ThreadName(stream.key.tid));
}

void ThreadAssembler::FinishThread() {
  if (!feed_) return;
  feed_->Finish(last_end_ip_, joins_[feed_stream_].TakeTrailing(), last_end_ns_);
  AddThreadToSummary(*feed_, summary_);
  summary_.stack_units.copied_events += feed_->adopted_events().first;
  summary_.stack_units.joined_events += feed_->adopted_events().second;
  ++summary_.threads;
  feed_.reset();
}

void ThreadAssembler::Consume(size_t index, const WorkUnit& work, UnitEvents& events) {
  if (missing_code_ips_.size() < 4096) {
    missing_code_ips_.insert(events.stats.missing_code_ips.begin(),
                             events.stats.missing_code_ips.end());
  }
  Stream& stream = streams_[work.stream];
  UnitJoin& join = joins_[work.stream];
  if (stream.cpu >= 0) {
    FinishThread();  // the per-thread streams all came first
    // As for a thread's stream: instructions retired before the join count in the first event
    // after it (the CPU's thread does not change at a PSB), or they would be lost.
    join.Join(work.piece, work.unit, events);
    cpu_threads_.Consume(index, StreamName(stream), events);
    cpu_threads_.Release(work.following_start_ns);
    return;
  }
  if (work.stream != feed_stream_) {
    FinishThread();
    feed_stream_ = work.stream;
    feed_piece_ = SIZE_MAX;
    BeginThread(stream);
    // Per-thread streams are fed one after another: the thread's trackers are their sinks'
    // only writers (StackTrackerOptions::sole_writer), unlike per-CPU threads (CpuThreads).
    StackTrackerOptions options = tracker_options_;
    options.sole_writer = true;
    feed_ = std::make_unique<ThreadFeed>(stream.key, code_, sinks_, stream.triggers, options);
  }
  if (work.piece != feed_piece_) {
    feed_piece_ = work.piece;
    const Piece& piece = stream.pieces[work.piece];
    if (!piece.loss_before.empty()) {
      feed_->CountGap(GapCause::kLostData);
      feed_->Gap(GapCause::kLostData, piece.loss_before, join.TakeTrailing());
    }
  }
  feed_->AddStats(events.stats);
  join.Join(work.piece, work.unit, events);
  if (speculations_.empty()) {
    feed_->DeliverRun(events.events);
  } else {
    switch (feed_->DeliverUnit(events.events, speculations_[index % speculations_.size()])) {
      case ThreadFeed::UnitTracking::kSerial: ++summary_.stack_units.serial; break;
      case ThreadFeed::UnitTracking::kReconciled: ++summary_.stack_units.reconciled; break;
      case ThreadFeed::UnitTracking::kReplayed: ++summary_.stack_units.replayed; break;
    }
  }
  last_end_ip_ = events.last_end_ip;
  last_end_ns_ = events.end_ns;
}

void ThreadAssembler::Finish(const std::function<bool(size_t)>& decoded, bool windowed) {
  FinishThread();
  // Pieces without a single PSB decode to nothing: say so, and keep the track of a thread none of
  // whose trace was decodable, with its gaps.
  for (size_t s = 0; s < streams_.size(); ++s) {
    const Stream& stream = streams_[s];
    std::unique_ptr<ThreadFeed> empty;
    if (!decoded(s) && stream.cpu < 0 && !windowed) {
      BeginThread(stream);
      empty = std::make_unique<ThreadFeed>(stream.key, code_, sinks_, std::vector<TriggerMark>{});
      ++summary_.threads;
      ThreadCount count;
      count.pid = stream.key.pid;
      count.tid = stream.key.tid;
      summary_.per_thread.push_back(count);
    }
    for (const Piece& piece : stream.pieces) {
      if (empty && !piece.loss_before.empty()) {
        empty->Gap(GapCause::kLostData, piece.loss_before, 0);
        summary_.stats[Stat::kLostDataGaps]++;
      }
      if (piece.has_psb || piece.size == 0) continue;
      std::string detail = "no PSB in " + std::to_string(piece.size) +
                           " bytes of trace: nothing to decode";
      summary_.stats[Stat::kDecodeErrorGaps]++;
      if (empty) empty->Gap(GapCause::kDecodeError, detail, 0);
      summary_.notes.push_back(StreamName(stream) + ": " + detail);
    }
    if (empty) empty->Finish(0, 0);
  }
  cpu_threads_.Finish(summary_);
}

}  // namespace ptscope::decode
