#include "perf_event.h"

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

Result<PerfEvent> PerfEvent::Open(const perf_event_attr& attr, int pid, int cpu,
                                  const std::string& what) {
  long fd = syscall(SYS_perf_event_open, &attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    Errc code = (err == EACCES || err == EPERM) ? Errc::kPermission
                : err == ESRCH                  ? Errc::kNotFound
                : (err == ENOENT || err == EOPNOTSUPP) ? Errc::kUnsupported
                                                       : Errc::kIo;
    return MakeError(code, PerfOpenErrorMessage(err, what));
  }
  PerfEvent event;
  event.fd_ = static_cast<int>(fd);
  event.what_ = what;
  return event;
}

PerfEvent::PerfEvent(PerfEvent&& other) noexcept { *this = std::move(other); }

PerfEvent& PerfEvent::operator=(PerfEvent&& other) noexcept {
  if (this != &other) {
    Release();
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
  if (aux_ != nullptr) munmap(aux_, aux_size_);
  if (base_ != nullptr) munmap(base_, base_size_);
  if (fd_ >= 0) close(fd_);
  aux_ = base_ = nullptr;
  fd_ = -1;
}

Status PerfEvent::MapRing(uint64_t data_pages) {
  uint64_t size = (data_pages + 1) * PageSize();
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
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
  void* aux = mmap(nullptr, aux_bytes, prot, MAP_SHARED, fd_, static_cast<off_t>(base_size_));
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
  if (ioctl(fd_, PERF_EVENT_IOC_SET_OUTPUT, target.fd_) != 0)
    return MakeError(Errc::kIo, "PERF_EVENT_IOC_SET_OUTPUT from " + what_ + " to " + target.what_ +
                                    " failed: " + std::strerror(errno));
  return Ok();
}

Status PerfEvent::Enable() {
  if (ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0) != 0)
    return MakeError(Errc::kIo, "enabling " + what_ + " failed: " + std::strerror(errno));
  return Ok();
}

Status PerfEvent::Disable() {
  if (ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0) != 0)
    return MakeError(Errc::kIo, "disabling " + what_ + " failed: " + std::strerror(errno));
  return Ok();
}

Result<uint64_t> PerfEvent::Id() const {
  uint64_t id = 0;
  if (ioctl(fd_, PERF_EVENT_IOC_ID, &id) != 0)
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
