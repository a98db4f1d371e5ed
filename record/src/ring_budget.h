// How much memory a recording may lock for its perf rings, and ring sizes that fit in it.
//
// The kernel charges every mmapped perf ring and AUX area (perf_mmap(), kernel/events/core.c):
// first against a per-user allowance of perf_event_mlock_kb per online CPU (user->locked_vm,
// shared by all of the user's processes), then against RLIMIT_MEMLOCK (this process's
// mm->pinned_vm); past both, mmap fails with EPERM. Root, CAP_IPC_LOCK and
// perf_event_paranoid = -1 are exempt. perf sizes its rings to fit (smaller defaults for
// unprivileged users); so does pt-record: sideband rings first, then the PT event's data ring,
// then (unless --snapshot-size asked for a size) the AUX area.
#pragma once

#include <cstdint>
#include <string>

#include "host_info.h"
#include "ptscope/result.h"

namespace ptscope::record {

struct LockedBudget {
  bool unlimited = false;     // root, CAP_IPC_LOCK, or perf_event_paranoid -1
  uint64_t mlock_kb = 0;      // perf_event_mlock_kb
  uint64_t cpus = 1;          // online CPUs
  uint64_t user_pages = 0;    // perf_event_mlock_kb × online CPUs, in pages
  uint64_t rlimit_pages = 0;  // RLIMIT_MEMLOCK in pages (UINT64_MAX: unlimited)
  uint64_t pages() const;     // what may be locked in all
  // "516 KiB × 2 CPUs + ulimit -l 64 KiB = 1096 KiB"
  std::string Describe() const;
};
LockedBudget BudgetOf(const HostFacts& facts);

// How many rings of each kind a recording maps.
struct RingCounts {
  uint64_t sideband = 0;     // one per CPU
  uint64_t pt = 0;           // one per traced thread (or CPU with -a)
  uint64_t breakpoints = 0;  // --trigger: one per thread of the first process
};

struct RingPlan {
  uint64_t sideband_pages = 128;  // data pages of each ring (a power of two), plus the header page
  uint64_t pt_data_pages = 16;
  uint64_t aux_pages = 0;
  uint64_t breakpoint_pages = 1;
  uint64_t LockedPages(const RingCounts& counts) const;
};

// The ring sizes for `counts` within `budget`. `aux_bytes` is the AUX size per PT event; when
// `aux_is_default` it may shrink to fit (never below 16 KiB), else it is kept and the other rings
// shrink around it. Fails, with every number, when even the smallest rings do not fit.
Result<RingPlan> PlanRings(const LockedBudget& budget, const RingCounts& counts, uint64_t aux_bytes,
                           bool aux_is_default);

}  // namespace ptscope::record
