// A model of the Linux perf_event interface (event fds, the data ring, the AUX ring, the ioctls),
// for running pt-record's real session code (KernelPtSource behind record::PerfKernel) on hosts
// without Intel PT. Every rule is written from the kernel's own source, and the kernel function it
// comes from is named beside it (Linux 6.x: kernel/events/core.c, kernel/events/ring_buffer.c,
// arch/x86/events/intel/pt.c). Where the rule is not specific to Intel PT, tests/record/
// kernel_model_host_test.cpp checks the model against the kernel of the machine running the tests.
//
// The model does not know what pt-record does with the bytes: a test scripts the world — which
// task runs on which CPU, what PT bytes the hardware writes, which mappings and threads appear —
// usually from `on_poll`, which runs whenever the code under test waits on its fds.
#pragma once

#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "perf_kernel.h"
#include "ptscope/perf_records.h"

namespace ptscope::record::testing {

struct ModelHost {
  int ncpus = 2;                        // num_online_cpus()
  uint64_t perf_event_mlock_kb = 516;   // sysctl kernel.perf_event_mlock_kb (512 + one page)
  uint64_t rlimit_memlock = 8u << 20;   // RLIMIT_MEMLOCK in bytes (ulimit -l)
  bool cap_ipc_lock = false;            // capable(CAP_IPC_LOCK)
  bool perfmon = false;                 // perfmon_capable(): CAP_PERFMON or CAP_SYS_ADMIN
  int paranoid = 2;                     // sysctl kernel.perf_event_paranoid
  int kernel_major = 6, kernel_minor = 18;
  uint32_t pt_type = 10;                // the intel_pt PMU's attr.type (0: no intel_pt PMU)
  uint32_t num_address_ranges = 2;      // caps/num_address_ranges
  // The time fields of the user page (arch_perf_update_userpage): zero in VMs whose sched_clock
  // is not stable.
  bool cap_user_time_zero = true;
  uint16_t time_shift = 31;
  uint32_t time_mult = 1u << 31;
  uint64_t time_zero = 0;
  // find_lively_task_by_vpid(): whether a task exists. Default: the real process table (so a
  // thread that really exited gives ESRCH).
  std::function<bool(int tid)> task_alive;
  // How long Poll() waits at most on real fds (the world moves on at every Poll).
  int max_poll_wait_ms = 2;
};

// What the model keeps per event (for tests to inspect).
struct ModelEvent {
  perf_event_attr attr{};
  int pid = -1, cpu = -1;
  uint64_t id = 0;
  bool enabled = false;        // PERF_EVENT_STATE_ACTIVE/INACTIVE vs OFF
  bool exited = false;         // its task exited: poll reports POLLHUP
  bool pt = false;
  bool itrace_started = false;  // PERF_ATTACH_ITRACE
  std::vector<std::string> filters;
  int output_fd = -1;          // PERF_EVENT_IOC_SET_OUTPUT target
};

class KernelModel final : public PerfKernel {
 public:
  explicit KernelModel(ModelHost host = {});
  ~KernelModel() override;
  KernelModel(const KernelModel&) = delete;
  KernelModel& operator=(const KernelModel&) = delete;

  // record::PerfKernel: the system calls.
  int Open(const perf_event_attr& attr, int pid, int cpu, int group_fd,
           unsigned long flags) override;
  void* Map(int fd, size_t length, int prot, off_t offset) override;
  int Unmap(void* address, size_t length) override;
  int Ioctl(int fd, unsigned long request, unsigned long argument) override;
  int Close(int fd) override;
  int Poll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask) override;

  // The world. Tasks are named by tid; `pid` is the thread group.
  std::function<void(KernelModel&)> on_poll;
  void SchedIn(int pid, int tid, int cpu);
  void SchedOut(int tid, bool preempt = false);
  // The PT hardware of the CPU `tid` runs on writes `bytes` for it.
  void WritePt(int tid, std::span<const uint8_t> bytes);
  // perf_aux_output_flag(): e.g. PERF_AUX_FLAG_PARTIAL (intel_pt_handle_vmx).
  void FlagAux(int tid, uint64_t flags);
  void Mmap2(int pid, int tid, const perf::MmapRecord& mmap);
  void Comm(int pid, int tid, const std::string& comm, bool exec);
  void Fork(int pid, int ppid, int tid, int ptid);
  void Exit(int pid, int tid);
  void AdvanceClock(uint64_t ns) { clock_ += ns; }

  // Inspection.
  const ModelEvent* Event(int fd) const;
  std::vector<int> Fds() const;
  uint64_t user_locked_pages() const { return user_locked_vm_; }
  uint64_t pinned_pages() const { return pinned_vm_; }
  int running_on(int cpu) const;  // tid, or -1
  uint64_t clock() const { return clock_; }
  const ModelHost& host() const { return host_; }
  ModelHost& host() { return host_; }
  // Bits of perf_event_attr's flag word a kernel of this version knows (perf_copy_attr rejects
  // the others: __reserved_1).
  static uint64_t KnownAttrFlags(int major, int minor);

 private:
  struct Rb;  // struct perf_buffer (kernel_model_internal.h)
  struct Ev;  // struct perf_event
  Ev* Find(int fd);
  // Whether `ev` counts for task `tid` running on `cpu` (event_filter_match, inheritance).
  bool Follows(const Ev& ev, int tid, int cpu) const;
  void Output(Ev& ev, perf::Record record, int cpu, int pid, int tid);
  void StartPt(Ev& ev, int cpu, int pid, int tid);
  void StopPtOf(Ev& ev);
  void CommitAux(Ev& ev, bool stopping);
  void Disable(Ev& ev);
  void Enable(Ev& ev);
  void SchedInEvent(Ev& ev, int cpu, int pid, int tid);
  int SetOutput(Ev& ev, int output_fd);
  int SetFilter(Ev& ev, const char* text);
  void SideBand(int pid, int tid, const perf::Record& record, bool (*wants)(const perf_event_attr&));

  ModelHost host_;
  std::map<int, std::unique_ptr<Ev>> events_;
  std::map<void*, std::shared_ptr<Rb>> maps_;  // mmapped address → buffer
  std::map<int, int> running_;     // cpu → tid
  std::map<int, int> task_pid_;    // tid → pid
  std::map<int, int> parent_of_;   // tid → the tid it was forked from (inherited events)
  std::set<int> exited_;
  std::map<int, int> last_out_;    // cpu → the tid that last left it (SWITCH_CPU_WIDE)
  uint64_t next_id_ = 1;
  uint64_t clock_ = 1'000'000;
  uint64_t user_locked_vm_ = 0;    // user->locked_vm, in pages
  uint64_t pinned_vm_ = 0;         // mm->pinned_vm, in pages
};

}  // namespace ptscope::record::testing
