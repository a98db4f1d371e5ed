// The scheduling policy of pt-emulate --cpus, kept apart from ptrace so it can be unit-tested:
// which waiting thread a virtual CPU takes next, and in which order idle CPUs take threads.
//
// Policy (deterministic): the run queue is FIFO. A CPU takes the oldest waiting thread that last
// ran on another CPU (so threads migrate); the oldest of all only when no other CPU is idle to
// take it. Idle CPUs are offered threads in rotating order starting after a given CPU, so a lone
// thread visits every CPU in turn. A thread is skipped only in favour of an older one or by a CPU
// it just left while another CPU is free, so every waiting thread eventually runs.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <vector>

namespace ptscope::emulate {

class CpuScheduler {
 public:
  explicit CpuScheduler(size_t cpus) : current_(cpus, kIdle) {}

  static constexpr pid_t kIdle = 0;

  size_t cpus() const { return current_.size(); }
  pid_t current(int cpu) const { return current_[static_cast<size_t>(cpu)]; }
  bool idle(int cpu) const { return current(cpu) == kIdle; }
  void SetCurrent(int cpu, pid_t tid) { current_[static_cast<size_t>(cpu)] = tid; }

  // Appends `tid` (which last ran on `last_cpu`, -1: never) unless it is already waiting.
  void Enqueue(pid_t tid, int last_cpu);
  void Remove(pid_t tid);
  bool queued(pid_t tid) const;
  bool empty() const { return queue_.empty(); }

  // The thread `cpu` should run next, removed from the queue; nullopt: `cpu` stays idle.
  std::optional<pid_t> PickFor(int cpu);
  // CPUs in the order idle ones are offered threads: after+1, after+2, ... and `after` itself
  // last unless `skip_after` (after = -1: from CPU 0).
  std::vector<int> OfferOrder(int after, bool skip_after) const;

 private:
  struct Waiting {
    pid_t tid;
    int last_cpu;
  };
  std::vector<pid_t> current_;
  std::vector<Waiting> queue_;  // oldest first
};

}  // namespace ptscope::emulate
