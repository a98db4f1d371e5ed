// Per-CPU threads, delivered as their units are consumed (see cpu_threads.h).
#include "join/cpu_threads.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "capture/streams.h"

namespace ptscope::decode {

CpuThreads::CpuThreads(const format::Archive& archive, const DecoderSetup& setup,
                       const SidebandTimeline& timeline, CodeFacts& code,
                       const FeedSinks& sinks, const std::vector<uint32_t>& selected_threads,
                       StackTrackerOptions tracker_options)
    : archive_(archive),
      setup_(setup),
      timeline_(timeline),
      code_(code),
      sinks_(sinks),
      selected_(selected_threads),
      tracker_options_(tracker_options) {
  // At least 2^14 records each: below that, callers found late would start late too often.
  const size_t threads = std::max<size_t>(1, timeline.ScheduledThreadCount());
  tracker_options_.max_buffered_events =
      std::max<size_t>(size_t{1} << 14, tracker_options_.max_buffered_events / threads);
}

void CpuThreads::Consume(size_t plan_index, const std::string& stream_name, UnitEvents& events) {
  instructions_ += events.stats.instructions;
  counts_.Add(events.stats.counts);
  if (events.stats.events != 0) {
    first_ns_ = std::min(first_ns_, events.stats.first_ns);
    last_ns_ = std::max(last_ns_, events.stats.last_ns);
  }
  if (!events.stats.first_error.empty()) {
    notes_.push_back(stream_name + ": decode error: " + events.stats.first_error);
  }
  for (size_t r = 0; r < events.runs.size(); ++r) {
    const UnitEvents::Run& run = events.runs[r];
    size_t end = r + 1 < events.runs.size() ? events.runs[r + 1].first : events.events.size();
    if (run.first >= end) continue;
    if (run.thread.tid == 0 || !Selected(selected_, run.thread)) {
      for (size_t e = run.first; e < end; ++e) {
        counts_[Stat::kUnattributedInstructions] += events.events[e].insn_count;
      }
      continue;
    }
    keys_[run.thread.tid] = run.thread;
    Run waiting;
    waiting.tid = run.thread.tid;
    waiting.end_ip = events.events[end - 1].from;
    if (!spare_events_.empty()) {
      waiting.events = std::move(spare_events_.back());
      spare_events_.pop_back();
    }
    waiting.events.assign(events.events.begin() + run.first, events.events.begin() + end);
    waiting_.emplace(std::make_pair(events.events[run.first].time_ns, plan_index),
                     std::move(waiting));
  }
}

void CpuThreads::Release(uint64_t frontier_ns) {
  while (!waiting_.empty() && waiting_.begin()->first.first < frontier_ns) {
    Run& run = waiting_.begin()->second;
    Deliver(run);
    run.events.clear();
    spare_events_.push_back(std::move(run.events));
    waiting_.erase(waiting_.begin());
  }
}

void CpuThreads::Deliver(Run& run) {
  Thread& thread = threads_[run.tid];
  if (thread.feed == nullptr) {
    const ThreadKey& key = keys_.at(run.tid);
    sinks_.BeginThread(key, timeline_.ProcessName(key.pid), timeline_.ThreadName(key.tid));
    thread.feed = std::make_unique<ThreadFeed>(key, code_, sinks_,
                                               TriggersOf(archive_, setup_, key.tid),
                                               tracker_options_);
  }
  thread.feed->DeliverRun(run.events);
  thread.end_ip = run.end_ip;
}

void CpuThreads::Finish(DecodeSummary& summary) {
  Release(UINT64_MAX);
  for (auto& [tid, thread] : threads_) {
    thread.feed->Finish(thread.end_ip, 0);
    AddThreadToSummary(*thread.feed, summary);
    ++summary.threads;
    thread.feed.reset();
  }
  threads_.clear();
  // Instructions and gaps of per-CPU units count once, whoever ran them.
  summary.instructions += instructions_;
  summary.stats.Add(counts_);
  if (first_ns_ != UINT64_MAX) {
    summary.first_ns = std::min(summary.first_ns, first_ns_);
    summary.last_ns = std::max(summary.last_ns, last_ns_);
  }
  summary.notes.insert(summary.notes.end(), notes_.begin(), notes_.end());
  notes_.clear();
}

}  // namespace ptscope::decode
