// CpuFollower: on a per-CPU stream, which thread runs, by the context-switch sideband: looked up
// at each sync point and whenever tracing is enabled again. A new stretch begins when another
// thread is switched in, and also when the same thread is switched in again (it may have run on
// another CPU in between, whose stream this decoder does not see).
#pragma once

#include <cstdint>

#include "capture/sideband_timeline.h"
#include "events.h"

namespace ptscope::decode {

class CpuFollower {
 public:
  void Follow(const SidebandTimeline* timeline, uint32_t cpu) {
    timeline_ = timeline;
    cpu_ = cpu;
  }
  bool following() const { return timeline_ != nullptr; }

  enum class Change { kNone, kFirst, kSwitchedIn };
  // The thread on the CPU at `time_ns` (in *thread), and whether a stretch began: kFirst for the
  // decoder's first look-up, kSwitchedIn for a later one.
  Change Update(uint64_t time_ns, ThreadKey* thread) {
    uint64_t since_ns = 0;
    *thread = timeline_->ThreadOnCpu(cpu_, time_ns, &since_ns);
    if (have_thread_ && *thread == thread_ && since_ns == since_ns_) return Change::kNone;
    const Change change = have_thread_ ? Change::kSwitchedIn : Change::kFirst;
    have_thread_ = true;
    thread_ = *thread;
    since_ns_ = since_ns;
    return change;
  }

 private:
  const SidebandTimeline* timeline_ = nullptr;
  uint32_t cpu_ = 0;
  bool have_thread_ = false;
  ThreadKey thread_;
  uint64_t since_ns_ = 0;  // when thread_'s stretch on this CPU began (its switch-in)
};

}  // namespace ptscope::decode
