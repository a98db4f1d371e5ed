// The schedule of each CPU, held or looked up from chunks read again (see cpu_schedule.h).
#include "capture/cpu_schedule.h"

#include <algorithm>
#include <iterator>

namespace ptscope::decode {
namespace {

bool ByPidTid(const ThreadKey& a, const ThreadKey& b) {
  return a.pid != b.pid ? a.pid < b.pid : a.tid < b.tid;
}

void SortByTime(std::vector<CpuSchedule::Run>& runs) {
  std::stable_sort(runs.begin(), runs.end(),
                   [](const CpuSchedule::Run& a, const CpuSchedule::Run& b) {
                     return a.from_ns < b.from_ns;
                   });
}

}  // namespace

void CpuSchedule::Add(size_t chunk, uint32_t cpu, const Run& run) {
  if (run.thread.tid != 0) {
    auto at = std::lower_bound(threads_.begin(), threads_.end(), run.thread, ByPidTid);
    if (at == threads_.end() || !(*at == run.thread)) threads_.insert(at, run.thread);
  }
  auto [found, first_run] = cpus_.try_emplace(cpu);
  PerCpu& state = found->second;
  if (first_run && dropped_) state.held = false;
  if (state.spans.empty() || state.spans.back().chunk != chunk) {
    state.spans.push_back(Span{chunk, run.from_ns, run.from_ns, run});
  } else {
    Span& span = state.spans.back();
    span.first_ns = std::min(span.first_ns, run.from_ns);
    if (run.from_ns >= span.last_ns) {
      span.last_ns = run.from_ns;
      span.latest = run;
    }
  }
  if (state.spans.size() >= 2 && run.from_ns < state.spans[state.spans.size() - 2].last_ns) {
    state.in_order = false;
  }
  if (dropped_) return;
  state.runs.push_back(run);
  if (++held_ > held_budget_) DropHeldRuns();
}

void CpuSchedule::DropHeldRuns() {
  for (auto& [cpu, state] : cpus_) {
    std::vector<Run>().swap(state.runs);
    state.held = false;
  }
  held_ = 0;
  dropped_ = true;
}

void CpuSchedule::Finish(ChunkRuns chunk_runs) {
  chunk_runs_ = std::move(chunk_runs);
  for (auto& [cpu, state] : cpus_) {
    if (state.held) {
      SortByTime(state.runs);
      state.runs.shrink_to_fit();
    } else if (!state.in_order) {
      HoldWhole(cpu, state);
    }
  }
}

void CpuSchedule::HoldWhole(uint32_t cpu, PerCpu& state) {
  std::vector<CpuRun> chunk;
  for (const Span& span : state.spans) {
    chunk.clear();
    if (!chunk_runs_ || !chunk_runs_(span.chunk, &chunk)) {
      cache_->unread.push_back(span.chunk);  // (spans are in chunk order: stays sorted)
      continue;
    }
    for (const CpuRun& run : chunk) {
      if (run.cpu == cpu) state.runs.push_back(run.run);
    }
  }
  SortByTime(state.runs);
  state.runs.shrink_to_fit();
  state.held = true;
  std::sort(cache_->unread.begin(), cache_->unread.end());
  cache_->unread.erase(std::unique(cache_->unread.begin(), cache_->unread.end()),
                       cache_->unread.end());
}

ThreadKey CpuSchedule::Lookup(const std::vector<Run>& sorted, uint64_t time_ns,
                              uint64_t* since_ns) {
  auto after = std::upper_bound(sorted.begin(), sorted.end(), time_ns,
                                [](uint64_t t, const Run& run) { return t < run.from_ns; });
  if (after == sorted.begin()) return ThreadKey{};
  if (since_ns != nullptr) *since_ns = std::prev(after)->from_ns;
  return std::prev(after)->thread;
}

ThreadKey CpuSchedule::ThreadOn(uint32_t cpu, uint64_t time_ns, uint64_t* since_ns) const {
  if (since_ns != nullptr) *since_ns = 0;
  auto found = cpus_.find(cpu);
  if (found == cpus_.end()) return ThreadKey{};
  const PerCpu& state = found->second;
  if (state.held) return Lookup(state.runs, time_ns, since_ns);
  // The last chunk with a run at or before time_ns holds the answer (chunks follow each other
  // in time): its latest run when time_ns is past all of its runs, else one of its runs.
  auto after = std::upper_bound(state.spans.begin(), state.spans.end(), time_ns,
                                [](uint64_t t, const Span& span) { return t < span.first_ns; });
  if (after == state.spans.begin()) return ThreadKey{};
  const Span& span = *std::prev(after);
  if (time_ns >= span.last_ns) {
    if (since_ns != nullptr) *since_ns = span.latest.from_ns;
    return span.latest.thread;
  }
  std::lock_guard<std::mutex> lock(cache_->mutex);
  const Cached* cached = RunsOf(span.chunk);
  if (cached == nullptr) return ThreadKey{};
  auto runs = std::lower_bound(cached->by_cpu.begin(), cached->by_cpu.end(), cpu,
                               [](const auto& entry, uint32_t c) { return entry.first < c; });
  if (runs == cached->by_cpu.end() || runs->first != cpu) return ThreadKey{};  // (never: a span)
  return Lookup(runs->second, time_ns, since_ns);
}

const CpuSchedule::Cached* CpuSchedule::RunsOf(size_t chunk) const {
  Cache& cache = *cache_;
  ++cache.uses;
  Cached* oldest = &cache.entries[0];
  for (Cached& entry : cache.entries) {
    if (entry.chunk == chunk) {
      entry.used = cache.uses;
      return &entry;
    }
    if (entry.used < oldest->used) oldest = &entry;
  }
  if (std::binary_search(cache.unread.begin(), cache.unread.end(), chunk)) return nullptr;
  std::vector<CpuRun> read;
  if (!chunk_runs_ || !chunk_runs_(chunk, &read)) {
    cache.unread.insert(std::lower_bound(cache.unread.begin(), cache.unread.end(), chunk), chunk);
    return nullptr;
  }
  oldest->chunk = chunk;
  oldest->used = cache.uses;
  oldest->by_cpu.clear();
  for (const CpuRun& run : read) {  // (a few CPUs per chunk: a linear search)
    auto entry = std::find_if(oldest->by_cpu.begin(), oldest->by_cpu.end(),
                              [&](const auto& e) { return e.first == run.cpu; });
    if (entry == oldest->by_cpu.end()) {
      oldest->by_cpu.emplace_back(run.cpu, std::vector<Run>{});
      entry = std::prev(oldest->by_cpu.end());
    }
    entry->second.push_back(run.run);
  }
  std::sort(oldest->by_cpu.begin(), oldest->by_cpu.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [cpu, runs] : oldest->by_cpu) SortByTime(runs);
  return oldest;
}

size_t CpuSchedule::unread_chunks() const {
  std::lock_guard<std::mutex> lock(cache_->mutex);
  return cache_->unread.size();
}

bool CpuSchedule::streamed() const {
  return std::any_of(cpus_.begin(), cpus_.end(),
                     [](const auto& entry) { return !entry.second.held; });
}

}  // namespace ptscope::decode
