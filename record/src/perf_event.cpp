#include "perf_event.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace ptscope::record {

uint64_t PageSize() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

std::string PerfOpenErrorMessage(int err, const std::string& what) {
  std::string base = "perf_event_open(" + what + ") failed: " + std::strerror(err);
  switch (err) {
    case EACCES:
    case EPERM:
      return base + " (lower kernel.perf_event_paranoid, give pt-record CAP_PERFMON, or run as "
                    "root; in a container also allow perf_event_open in seccomp)";
    case ESRCH:
      return base + " (the process or thread exited)";
    case ENOENT:
    case EOPNOTSUPP:
      return base + " (this kernel or CPU does not support the event)";
    case EINVAL:
      return base + " (the kernel rejected the configuration: check --psb-period/--mtc-period/"
                    "--cyc-thresh against pt-record --check)";
    case EMFILE:
      return base + " (too many open files: raise ulimit -n)";
    case EBUSY:
      return base + " (another tool is using Intel PT or the breakpoint registers)";
    default:
      return base;
  }
}

namespace {

class SystemKernel final : public PerfKernel {
 public:
  int Open(const perf_event_attr& attr, int pid, int cpu, int group_fd,
           unsigned long flags) override {
    return static_cast<int>(syscall(SYS_perf_event_open, &attr, pid, cpu, group_fd, flags));
  }
  void* Map(int fd, size_t length, int prot, off_t offset) override {
    return mmap(nullptr, length, prot, MAP_SHARED, fd, offset);
  }
  int Unmap(void* address, size_t length) override { return munmap(address, length); }
  int Ioctl(int fd, unsigned long request, unsigned long argument) override {
    return ioctl(fd, request, argument);
  }
  int Close(int fd) override { return close(fd); }
  int Poll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask) override {
    return ppoll(fds, count, timeout, mask);
  }
};

}  // namespace

PerfKernel& SystemPerfKernel() {
  static SystemKernel kernel;
  return kernel;
}

Result<PerfEvent> PerfEvent::Open(PerfKernel& kernel, const perf_event_attr& attr, int pid,
                                  int cpu, const std::string& what, int* open_errno) {
  int fd = kernel.Open(attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (open_errno != nullptr) *open_errno = err;
    Errc code = (err == EACCES || err == EPERM) ? Errc::kPermission
                : err == ESRCH                  ? Errc::kNotFound
                : (err == ENOENT || err == EOPNOTSUPP) ? Errc::kUnsupported
                                                       : Errc::kIo;
    return MakeError(code, PerfOpenErrorMessage(err, what));
  }
  PerfEvent event;
  event.kernel_ = &kernel;
  event.fd_ = fd;
  event.what_ = what;
  return event;
}

PerfEvent::PerfEvent(PerfEvent&& other) noexcept { *this = std::move(other); }

PerfEvent& PerfEvent::operator=(PerfEvent&& other) noexcept {
  if (this != &other) {
    Release();
    kernel_ = other.kernel_;
    fd_ = std::exchange(other.fd_, -1);
    what_ = std::move(other.what_);
    base_ = std::exchange(other.base_, nullptr);
    base_size_ = std::exchange(other.base_size_, 0);
    aux_ = std::exchange(other.aux_, nullptr);
    aux_size_ = std::exchange(other.aux_size_, 0);
  }
  return *this;
}

PerfEvent::~PerfEvent() { Release(); }

void PerfEvent::Release() {
  if (aux_ != nullptr) kernel_->Unmap(aux_, aux_size_);
  if (base_ != nullptr) kernel_->Unmap(base_, base_size_);
  if (fd_ >= 0) kernel_->Close(fd_);
  aux_ = base_ = nullptr;
  fd_ = -1;
}

Status PerfEvent::MapRing(uint64_t data_pages) {
  uint64_t size = (data_pages + 1) * PageSize();
  void* base = kernel_->Map(fd_, size, PROT_READ | PROT_WRITE, 0);
  if (base == MAP_FAILED)
    return MakeError(errno == EPERM ? Errc::kPermission : Errc::kIo,
                     "mmap of the " + std::to_string(data_pages) + "-page ring of " + what_ +
                         " failed: " + std::strerror(errno) +
                         " (over kernel.perf_event_mlock_kb? use fewer/smaller buffers or "
                         "CAP_IPC_LOCK)");
  base_ = base;
  base_size_ = size;
  return Ok();
}

Status PerfEvent::MapAux(uint64_t aux_bytes, bool writable) {
  perf_event_mmap_page* header = page();
  header->aux_offset = base_size_;
  header->aux_size = aux_bytes;
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void* aux = kernel_->Map(fd_, aux_bytes, prot, static_cast<off_t>(base_size_));
  if (aux == MAP_FAILED)
    return MakeError(errno == EPERM ? Errc::kPermission : Errc::kIo,
                     "mmap of the " + std::to_string(aux_bytes / 1024) + " KiB AUX area of " +
                         what_ + " failed: " + std::strerror(errno) +
                         " (use a smaller --snapshot-size, raise kernel.perf_event_mlock_kb, or "
                         "grant CAP_IPC_LOCK)");
  aux_ = aux;
  aux_size_ = aux_bytes;
  return Ok();
}

Status PerfEvent::RedirectOutputTo(const PerfEvent& target) {
  if (kernel_->Ioctl(fd_, PERF_EVENT_IOC_SET_OUTPUT, static_cast<unsigned long>(target.fd_)) != 0)
    return MakeError(Errc::kIo, "PERF_EVENT_IOC_SET_OUTPUT from " + what_ + " to " + target.what_ +
                                    " failed: " + std::strerror(errno));
  return Ok();
}

Status PerfEvent::Enable() {
  if (kernel_->Ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0) != 0)
    return MakeError(Errc::kIo, "enabling " + what_ + " failed: " + std::strerror(errno));
  return Ok();
}

Status PerfEvent::Disable() {
  if (kernel_->Ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0) != 0)
    return MakeError(Errc::kIo, "disabling " + what_ + " failed: " + std::strerror(errno));
  return Ok();
}

Status PerfEvent::SetFilter(const std::string& filter) {
  if (kernel_->Ioctl(fd_, PERF_EVENT_IOC_SET_FILTER, reinterpret_cast<unsigned long>(filter.c_str())) != 0)
    return MakeError(Errc::kInvalidArgument, "--filter '" + filter + "' was refused by the kernel: " +
                                                 std::strerror(errno) +
                                                 " (check caps/ip_filtering and num_address_ranges)");
  return Ok();
}

Result<uint64_t> PerfEvent::Id() const {
  uint64_t id = 0;
  if (kernel_->Ioctl(fd_, PERF_EVENT_IOC_ID, reinterpret_cast<unsigned long>(&id)) != 0)
    return MakeError(Errc::kIo, "PERF_EVENT_IOC_ID on " + what_ + " failed: " + std::strerror(errno));
  return id;
}

DataRingView PerfEvent::data_ring() const {
  DataRingView view;
  view.page = page();
  view.data = static_cast<uint8_t*>(base_) + PageSize();
  view.data_size = base_size_ - PageSize();
  return view;
}

}  // namespace ptscope::record
