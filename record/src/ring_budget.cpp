#include "ring_budget.h"

#include <limits>

#include "perf_event.h"

namespace ptscope::record {
namespace {

constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

std::string Kib(uint64_t pages) { return std::to_string(pages * PageSize() / 1024) + " KiB"; }

}  // namespace

uint64_t LockedBudget::pages() const {
  if (unlimited || rlimit_pages == kUnlimited) return kUnlimited;
  return user_pages + rlimit_pages;
}

std::string LockedBudget::Describe() const {
  if (unlimited) return "unlimited (root, CAP_IPC_LOCK or perf_event_paranoid -1)";
  std::string text = std::to_string(mlock_kb) + " KiB (perf_event_mlock_kb) × " +
                     std::to_string(cpus) + (cpus == 1 ? " CPU" : " CPUs") + " + ulimit -l ";
  if (rlimit_pages == kUnlimited) return text + "unlimited";
  return text + Kib(rlimit_pages) + " = " + Kib(pages());
}

LockedBudget BudgetOf(const HostFacts& facts) {
  LockedBudget budget;
  // perf_mmap(): capable(CAP_IPC_LOCK) (root has it) or !perf_is_paranoid() lifts the limit.
  budget.unlimited = facts.privileges.root() || facts.privileges.cap_ipc_lock() ||
                     (facts.perf_event_paranoid && *facts.perf_event_paranoid == -1);
  const uint64_t page_kb = PageSize() / 1024;
  // 516 KiB when the sysctl cannot be read: the kernel's default (512 KiB + one page).
  budget.mlock_kb = facts.perf_event_mlock_kb.value_or(512 + page_kb);
  budget.cpus = facts.online_cpus.empty() ? 1 : facts.online_cpus.size();
  budget.user_pages = budget.mlock_kb / page_kb * budget.cpus;
  budget.rlimit_pages = facts.rlimit_memlock ? *facts.rlimit_memlock / PageSize() : kUnlimited;
  return budget;
}

uint64_t RingPlan::LockedPages(const RingCounts& c) const {
  return c.sideband * (sideband_pages + 1) + c.pt * (pt_data_pages + 1 + aux_pages) +
         c.breakpoints * (breakpoint_pages + 1);
}

Result<RingPlan> PlanRings(const LockedBudget& budget, const RingCounts& counts, uint64_t aux_bytes,
                           bool aux_is_default) {
  RingPlan plan;
  plan.aux_pages = aux_bytes / PageSize();
  const uint64_t limit = budget.pages();
  // Shrink in this order: the sideband rings to perf's unprivileged size and below (they are
  // drained every 100 ms), the PT event's data ring (AUX and ITRACE_START records only), then a
  // default AUX area; then the smallest rings that still work.
  const uint64_t kMinAuxPages = 16 * 1024 / PageSize();
  while (plan.LockedPages(counts) > limit) {
    if (plan.sideband_pages > 16) {
      plan.sideband_pages /= 2;
    } else if (plan.pt_data_pages > 4) {
      plan.pt_data_pages /= 2;
    } else if (aux_is_default && plan.aux_pages > kMinAuxPages) {
      plan.aux_pages /= 2;
    } else if (plan.sideband_pages > 4) {
      plan.sideband_pages /= 2;
    } else if (plan.pt_data_pages > 2) {
      plan.pt_data_pages /= 2;
    } else {
      RingPlan smallest = plan;
      return MakeError(
          Errc::kPermission,
          "the perf rings need " + Kib(smallest.LockedPages(counts)) + " of locked memory (" +
              std::to_string(counts.sideband) + " sideband rings of " +
              Kib(smallest.sideband_pages + 1) + ", " + std::to_string(counts.pt) +
              " PT events of " + Kib(smallest.pt_data_pages + 1) + " + " +
              Kib(smallest.aux_pages) + " AUX" +
              (counts.breakpoints ? ", " + std::to_string(counts.breakpoints) +
                                        " breakpoints of " + Kib(smallest.breakpoint_pages + 1)
                                  : std::string()) +
              ") but this user may lock " + budget.Describe() +
              ": use a smaller --snapshot-size, raise ulimit -l or kernel.perf_event_mlock_kb, "
              "or give pt-record CAP_IPC_LOCK");
    }
  }
  return plan;
}

}  // namespace ptscope::record
