// The perf_event system calls a recorder makes, behind an interface: the hardware source talks to
// the kernel only through it, so that tests drive the real source code against a model of the
// kernel (tests/record/kernel_model.h) on hosts without Intel PT. Calls follow the system calls'
// convention: -1 (or MAP_FAILED) with errno set on failure.
#pragma once

#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ptscope::record {

class PerfKernel {
 public:
  virtual ~PerfKernel() = default;
  virtual int Open(const perf_event_attr& attr, int pid, int cpu, int group_fd,
                   unsigned long flags) = 0;
  virtual void* Map(int fd, size_t length, int prot, off_t offset) = 0;
  virtual int Unmap(void* address, size_t length) = 0;
  virtual int Ioctl(int fd, unsigned long request, unsigned long argument) = 0;
  virtual int Close(int fd) = 0;
  // ppoll(2): the source's wait for its rings, the target's exit and signals.
  virtual int Poll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask) = 0;
};

// The real system calls.
PerfKernel& SystemPerfKernel();

}  // namespace ptscope::record
