// One perf_event_open file descriptor with its mmapped ring (and AUX area), owned RAII-style.
// Errors from the kernel become sentences that say which event, which errno, and what to do.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <string>

#include "perf_kernel.h"
#include "perf_ring.h"
#include "ptscope/result.h"

namespace ptscope::record {

class PerfEvent {
 public:
  // `what` names the event in messages ("intel_pt for tid 123"). pid -1 = every task (needs cpu).
  // On failure `*open_errno` (if given) receives the call's errno (ESRCH, EMFILE, EINVAL...).
  static Result<PerfEvent> Open(PerfKernel& kernel, const perf_event_attr& attr, int pid,
                                int cpu, const std::string& what, int* open_errno = nullptr);
  PerfEvent() = default;
  PerfEvent(PerfEvent&& other) noexcept;
  PerfEvent& operator=(PerfEvent&& other) noexcept;
  PerfEvent(const PerfEvent&) = delete;
  PerfEvent& operator=(const PerfEvent&) = delete;
  ~PerfEvent();

  // Maps the header page plus a data ring of `data_pages` pages (a power of two).
  Status MapRing(uint64_t data_pages);
  // Maps the AUX area after the ring: writable = full mode, read-only = overwrite snapshots.
  Status MapAux(uint64_t aux_bytes, bool writable);
  // Sends this event's records into `target`'s ring (same CPU or same task) instead of its own.
  Status RedirectOutputTo(const PerfEvent& target);

  Status Enable();
  Status Disable();
  // PERF_EVENT_IOC_SET_FILTER (Intel PT address filters).
  Status SetFilter(const std::string& filter);
  Result<uint64_t> Id() const;  // PERF_EVENT_IOC_ID: the sample id in IDENTIFIER

  int fd() const { return fd_; }
  const std::string& what() const { return what_; }
  bool mapped() const { return base_ != nullptr; }
  perf_event_mmap_page* page() const { return static_cast<perf_event_mmap_page*>(base_); }
  DataRingView data_ring() const;
  const uint8_t* aux() const { return static_cast<const uint8_t*>(aux_); }
  uint64_t aux_size() const { return aux_size_; }

 private:
  void Release();
  PerfKernel* kernel_ = nullptr;
  int fd_ = -1;
  std::string what_;
  void* base_ = nullptr;
  uint64_t base_size_ = 0;
  void* aux_ = nullptr;
  uint64_t aux_size_ = 0;
};

// The sentence for a failed perf_event_open (exposed for tests).
std::string PerfOpenErrorMessage(int err, const std::string& what);

uint64_t PageSize();

}  // namespace ptscope::record
