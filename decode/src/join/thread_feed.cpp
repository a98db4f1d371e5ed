// Thread feeds (see thread_feed.h).
#include "join/thread_feed.h"

namespace ptscope::decode {

void AddThreadToSummary(const ThreadFeed& feed, DecodeSummary& summary) {
  const FlowStats& stats = feed.stats();
  summary.instructions += stats.instructions;
  summary.symbolized_instructions += feed.symbolized();
  summary.traced_ns += feed.traced_ns();
  summary.gap_ns += feed.gap_ns();
  summary.threads_ending_in_gap += feed.ends_in_gap() ? 1 : 0;
  ThreadCount count;
  count.pid = feed.key().pid;
  count.tid = feed.key().tid;
  count.instructions = feed.instructions();
  summary.per_thread.push_back(count);
  summary.stats.Add(stats.counts);
  summary.stats.Add(feed.tracker_stats());
  if (stats.events != 0) {
    summary.first_ns = std::min(summary.first_ns, stats.first_ns);
    summary.last_ns = std::max(summary.last_ns, stats.last_ns);
  }
  if (!stats.first_error.empty()) {
    summary.notes.push_back("thread " + std::to_string(feed.key().tid) +
                            ": first decode error: " + stats.first_error);
  }
}

}  // namespace ptscope::decode
