#include "cpu_scheduler.h"

#include <algorithm>

namespace ptscope::emulate {

void CpuScheduler::Enqueue(pid_t tid, int last_cpu) {
  if (!queued(tid)) queue_.push_back({tid, last_cpu});
}

void CpuScheduler::Remove(pid_t tid) {
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                              [tid](const Waiting& w) { return w.tid == tid; }),
               queue_.end());
}

bool CpuScheduler::queued(pid_t tid) const {
  return std::any_of(queue_.begin(), queue_.end(), [tid](const Waiting& w) { return w.tid == tid; });
}

std::optional<pid_t> CpuScheduler::PickFor(int cpu) {
  auto pick = std::find_if(queue_.begin(), queue_.end(),
                           [cpu](const Waiting& w) { return w.last_cpu != cpu; });
  if (pick == queue_.end()) {
    for (size_t c = 0; c < cpus(); ++c) {
      if (static_cast<int>(c) != cpu && idle(static_cast<int>(c))) return std::nullopt;
    }
    pick = queue_.begin();  // nobody else can take it: no migration this time
  }
  if (pick == queue_.end()) return std::nullopt;
  const pid_t tid = pick->tid;
  queue_.erase(pick);
  return tid;
}

std::vector<int> CpuScheduler::OfferOrder(int after, bool skip_after) const {
  const int n = static_cast<int>(cpus());
  std::vector<int> order;
  for (int k = 1; k <= n; ++k) {
    const int c = ((after < 0 ? -1 : after) + k) % n;
    if (!(skip_after && c == after)) order.push_back(c);
  }
  return order;
}

}  // namespace ptscope::emulate
