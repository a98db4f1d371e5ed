// The perf_event system calls of the model: open, mmap (with the kernel's locked-page accounting),
// munmap, ioctl, close and poll. The world (scheduling, PT hardware, sideband) is in
// kernel_model_world.cpp. Each rule names the kernel function it comes from.
#include "kernel_model.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "kernel_model_internal.h"

namespace ptscope::record::testing {
namespace {

uint64_t FlagWord(const perf_event_attr& attr) {
  uint64_t word = 0;
  std::memcpy(&word, reinterpret_cast<const char*>(&attr) + offsetof(perf_event_attr, read_format) + 8,
              sizeof word);
  return word;
}

template <typename Set>
uint64_t BitOf(Set set) {
  perf_event_attr attr{};
  set(attr);
  return FlagWord(attr);
}

bool PowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

bool RealTaskAlive(int tid) {
  struct stat st {};
  if (::stat(("/proc/" + std::to_string(tid)).c_str(), &st) != 0) return false;
  return ::kill(tid, 0) == 0 || errno != ESRCH;
}

int Fail(int err) {
  errno = err;
  return -1;
}

void* FailMap(int err) {
  errno = err;
  return MAP_FAILED;
}

// intel_pt's PT_CONFIG_MASK with the period fields (arch/x86/events/intel/pt.c): attr.config
// bits outside it make pt_event_valid() fail.
constexpr uint64_t kPtConfigMask = (1ull << 0) | (1ull << 1) | (1ull << 4) | (1ull << 5) |
                                   (1ull << 9) | (1ull << 10) | (1ull << 11) | (1ull << 12) |
                                   (1ull << 13) | (0xfull << 14) | (0xfull << 19) |
                                   (0xfull << 24) | (1ull << 31) | (1ull << 55);

}  // namespace

uint64_t KernelModel::KnownAttrFlags(int major, int minor) {
  auto at_least = [&](int a, int b) { return major > a || (major == a && minor >= b); };
  uint64_t known = (uint64_t{1} << 29) - 1;  // disabled .. namespaces (Linux 4.12)
  if (at_least(5, 1)) known |= BitOf([](auto& a) { a.ksymbol = 1; }) |
                               BitOf([](auto& a) { a.bpf_event = 1; });
  if (at_least(5, 4)) known |= BitOf([](auto& a) { a.aux_output = 1; });
  if (at_least(5, 7)) known |= BitOf([](auto& a) { a.cgroup = 1; });
  if (at_least(5, 9)) known |= BitOf([](auto& a) { a.text_poke = 1; });
  if (at_least(5, 12)) known |= BitOf([](auto& a) { a.build_id = 1; });
  if (at_least(5, 13)) {
    known |= BitOf([](auto& a) { a.inherit_thread = 1; }) |
             BitOf([](auto& a) { a.remove_on_exec = 1; }) | BitOf([](auto& a) { a.sigtrap = 1; });
  }
  return known;
}

KernelModel::KernelModel(ModelHost host) : host_(std::move(host)) {
  if (!host_.task_alive) host_.task_alive = RealTaskAlive;
}

KernelModel::~KernelModel() {
  // The process exits: exit_mmap() unmaps what it still maps (perf_mmap_close() for each).
  for (auto& [address, rb] : maps_) {
    if (address == rb->aux) {
      std::free(rb->aux);
      rb->aux = nullptr;
    } else if (address == rb->base) {
      std::free(rb->base);
      rb->base = nullptr;
    }
  }
  for (auto& [fd, ev] : events_) ::close(fd);
}

KernelModel::Ev* KernelModel::Find(int fd) {
  auto it = events_.find(fd);
  return it == events_.end() ? nullptr : it->second.get();
}

const ModelEvent* KernelModel::Event(int fd) const {
  auto it = events_.find(fd);
  return it == events_.end() ? nullptr : &it->second->pub;
}

std::vector<int> KernelModel::Fds() const {
  std::vector<int> fds;
  for (const auto& [fd, ev] : events_) fds.push_back(fd);
  return fds;
}

int KernelModel::running_on(int cpu) const {
  auto it = running_.find(cpu);
  return it == running_.end() ? -1 : it->second;
}

int KernelModel::Open(const perf_event_attr& attr, int pid, int cpu, int group_fd,
                      unsigned long flags) {
  if (pid == 0) pid = static_cast<int>(::gettid());  // find_lively_task_by_vpid(0): current
  // sys_perf_event_open: "for future expandability".
  const unsigned long all = PERF_FLAG_FD_NO_GROUP | PERF_FLAG_FD_OUTPUT | PERF_FLAG_PID_CGROUP |
                            PERF_FLAG_FD_CLOEXEC;
  if (flags & ~all) return Fail(EINVAL);
  // perf_copy_attr: a size below PERF_ATTR_SIZE_VER0 or above a page is E2BIG; reserved bits
  // (__reserved_1: every flag this kernel version does not know) are EINVAL.
  const uint32_t size = attr.size == 0 ? PERF_ATTR_SIZE_VER0 : attr.size;
  if (size < PERF_ATTR_SIZE_VER0 || size > static_cast<uint32_t>(::getpagesize())) return Fail(E2BIG);
  if (FlagWord(attr) & ~KnownAttrFlags(host_.kernel_major, host_.kernel_minor)) return Fail(EINVAL);
  if (attr.sample_type & ~(PERF_SAMPLE_MAX - 1)) return Fail(EINVAL);
  if (!attr.inherit && attr.inherit_thread) return Fail(EINVAL);
  if (attr.remove_on_exec && attr.enable_on_exec) return Fail(EINVAL);
  if (attr.sigtrap && !attr.remove_on_exec) return Fail(EINVAL);
  // sys_perf_event_open -> perf_allow_kernel(): kernel tracing needs paranoid <= 1 or CAP_PERFMON.
  if (!attr.exclude_kernel && host_.paranoid > 1 && !host_.perfmon) return Fail(EACCES);
  // perf_event_alloc(): a CPU beyond the online ones, or no CPU and no task.
  if (cpu >= host_.ncpus || cpu < -1 || (cpu == -1 && pid == -1)) return Fail(EINVAL);
  if (group_fd != -1) return Fail(EINVAL);  // groups: not used by the recorders, not modelled
  // perf_init_event() -> pmu->event_init(): the PMU of attr.type.
  bool pt = false;
  switch (attr.type) {
    case PERF_TYPE_SOFTWARE:
      if (attr.config >= PERF_COUNT_SW_MAX) return Fail(ENOENT);  // perf_swevent_init
      break;
    case PERF_TYPE_BREAKPOINT:
      break;
    default:
      if (host_.pt_type == 0 || attr.type != host_.pt_type) return Fail(ENOENT);
      if ((attr.config & kPtConfigMask) != attr.config) return Fail(EINVAL);  // pt_event_valid
      pt = true;
  }
  // find_get_context(): a CPU-wide event needs perf_allow_cpu (paranoid <= 0 or CAP_PERFMON).
  if (pid == -1 && host_.paranoid > 0 && !host_.perfmon) return Fail(EACCES);
  // get_unused_fd_flags(): a real descriptor, so that RLIMIT_NOFILE applies as in the kernel.
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return -1;  // EMFILE, ENFILE
  // find_lively_task_by_vpid(): ESRCH for a task that does not exist (or exited).
  if (pid != -1 && (exited_.count(pid) != 0 || !host_.task_alive(pid))) {
    ::close(fd);
    return Fail(ESRCH);
  }
  auto ev = std::make_unique<Ev>();
  ev->pub.attr = attr;
  ev->pub.pid = pid;
  ev->pub.cpu = cpu;
  ev->pub.id = next_id_++;  // atomic64_inc_return(&perf_event_id)
  ev->pub.enabled = !attr.disabled;
  ev->pub.pt = pt;
  events_[fd] = std::move(ev);
  return fd;
}

void* KernelModel::Map(int fd, size_t length, int prot, off_t offset) {
  Ev* ev = Find(fd);
  if (ev == nullptr) return FailMap(EBADF);
  const uint64_t page = static_cast<uint64_t>(::getpagesize());
  // perf_mmap(): no mmap of an inherited per-task event (every child would write into it).
  if (ev->pub.cpu == -1 && ev->pub.attr.inherit) return FailMap(EINVAL);
  uint64_t nr_pages = length / page;
  if (nr_pages > INT32_MAX) return FailMap(ENOMEM);
  if (length != page * nr_pages) return FailMap(EINVAL);
  uint64_t user_extra = nr_pages;
  const bool aux = offset != 0;
  Rb* rb = nullptr;
  if (!aux) {
    nr_pages -= 1;  // the user page
    if (nr_pages != 0 && !PowerOfTwo(nr_pages)) return FailMap(EINVAL);
    if (ev->rb != nullptr) {  // mapped again (directly or through SET_OUTPUT)
      if (ev->rb->data_pages != nr_pages) return FailMap(EINVAL);
      ++ev->rb->mmap_count;
      return ev->rb->base;
    }
  } else {
    // perf_mmap(), AUX area: above the data ring, where user_page->aux_offset says, of the size
    // user_page->aux_size says, a power of two pages, after the data ring was mapped.
    rb = ev->rb.get();
    if (rb == nullptr) return FailMap(EINVAL);
    const uint64_t aux_offset = rb->page->aux_offset;
    const uint64_t aux_size = rb->page->aux_size;
    if (aux_offset < rb->data_size + page) return FailMap(EINVAL);
    if (aux_offset != static_cast<uint64_t>(offset)) return FailMap(EINVAL);
    if (rb->aux != nullptr && rb->aux_offset != aux_offset) return FailMap(EINVAL);
    if (aux_size != length || aux_size != nr_pages * page) return FailMap(EINVAL);
    if (rb->aux != nullptr && rb->aux_pages != nr_pages) return FailMap(EINVAL);
    if (!PowerOfTwo(nr_pages)) return FailMap(EINVAL);
    if (rb->aux != nullptr) return rb->aux;
  }
  // perf_mmap(): locked-page accounting. Every user may lock perf_event_mlock_kb per online CPU
  // (user->locked_vm); beyond that, pages count against RLIMIT_MEMLOCK (mm->pinned_vm), unless
  // perf_event_paranoid is -1 or the process has CAP_IPC_LOCK.
  const uint64_t user_lock_limit = (host_.perf_event_mlock_kb / (page / 1024)) * host_.ncpus;
  uint64_t user_locked = std::min(user_locked_vm_, user_lock_limit) + user_extra;
  uint64_t extra = 0;
  if (user_locked > user_lock_limit) {
    extra = user_locked - user_lock_limit;
    user_extra -= extra;
  }
  const uint64_t lock_limit = host_.rlimit_memlock / page;
  const uint64_t locked = pinned_vm_ + extra;
  if (locked > lock_limit && host_.paranoid > -1 && !host_.cap_ipc_lock) return FailMap(EPERM);
  const bool writable = (prot & PROT_WRITE) != 0;  // VM_WRITE -> RING_BUFFER_WRITABLE
  if (!aux) {
    // rb_alloc() + ring_buffer_init(): a read-only mapping is an overwrite ring.
    auto fresh = std::make_shared<Rb>();
    fresh->base_len = (nr_pages + 1) * page;
    fresh->base = std::aligned_alloc(page, fresh->base_len);
    std::memset(fresh->base, 0, fresh->base_len);
    fresh->page = static_cast<perf_event_mmap_page*>(fresh->base);
    fresh->data = static_cast<uint8_t*>(fresh->base) + page;
    fresh->data_pages = nr_pages;
    fresh->data_size = nr_pages * page;
    fresh->overwrite = !writable;
    fresh->mmap_locked = extra;
    fresh->mmap_count = 1;
    // perf_event_init_userpage() and arch_perf_update_userpage() (x86: the TSC conversion).
    fresh->page->data_offset = page;
    fresh->page->data_size = fresh->data_size;
    fresh->page->cap_user_time = 1;
    fresh->page->cap_user_time_zero = host_.cap_user_time_zero ? 1 : 0;
    fresh->page->time_shift = host_.time_shift;
    fresh->page->time_mult = host_.time_mult;
    fresh->page->time_zero = host_.time_zero;
    ev->rb = fresh;
    maps_[fresh->base] = fresh;
    rb = fresh.get();
  } else {
    // rb_alloc_aux(): only a PMU with an AUX area (has_aux); the page array must fit in one
    // allocation of order MAX_PAGE_ORDER (so at most 2 GiB of 4 KiB pages); full mode's
    // watermark defaults to half the buffer.
    if (!ev->pub.pt) return FailMap(EOPNOTSUPP);
    if (nr_pages * sizeof(void*) > (page << 10)) return FailMap(ENOMEM);
    rb->aux_pages = nr_pages;
    rb->aux_size = nr_pages * page;
    rb->aux_offset = static_cast<uint64_t>(offset);
    rb->aux = static_cast<uint8_t*>(std::aligned_alloc(page, rb->aux_size));
    std::memset(rb->aux, 0, rb->aux_size);  // PERF_AUX_GFP has __GFP_ZERO
    rb->aux_overwrite = !writable;
    rb->aux_watermark = rb->aux_overwrite ? 0
                        : ev->pub.attr.aux_watermark != 0
                            ? ev->pub.attr.aux_watermark
                            : std::min<uint64_t>(UINT32_MAX, rb->aux_size / 2);
    rb->aux_mmap_locked = extra;
    maps_[rb->aux] = ev->rb;
  }
  user_locked_vm_ += user_extra;
  pinned_vm_ += extra;
  return aux ? static_cast<void*>(rb->aux) : rb->base;
}

int KernelModel::Unmap(void* address, size_t length) {
  auto it = maps_.find(address);
  if (it == maps_.end()) return ::munmap(address, length);
  std::shared_ptr<Rb> rb = it->second;
  maps_.erase(it);
  if (address == rb->aux) {
    // perf_mmap_close(), AUX: the pages go back to the user and the mm.
    user_locked_vm_ -= rb->aux_pages - rb->aux_mmap_locked;
    pinned_vm_ -= rb->aux_mmap_locked;
    for (auto& [fd, ev] : events_) {
      if (ev->rb == rb && ev->hw_active) ev->hw_active = false;  // perf_pmu_output_stop
    }
    std::free(rb->aux);
    rb->aux = nullptr;
    rb->aux_pages = rb->aux_size = 0;
    return 0;
  }
  if (--rb->mmap_count > 0) return 0;
  // perf_mmap_close(): the last mapping detaches every event writing into the buffer, then the
  // accounting is undone.
  user_locked_vm_ -= rb->data_pages + 1 - rb->mmap_locked;
  pinned_vm_ -= rb->mmap_locked;
  for (auto& [fd, ev] : events_) {
    if (ev->rb == rb) ev->rb = nullptr;
  }
  std::free(rb->base);
  rb->base = nullptr;
  return 0;
}

int KernelModel::Ioctl(int fd, unsigned long request, unsigned long argument) {
  Ev* ev = Find(fd);
  if (ev == nullptr) return Fail(EBADF);
  switch (request) {  // _perf_ioctl()
    case PERF_EVENT_IOC_ENABLE:
      Enable(*ev);
      return 0;
    case PERF_EVENT_IOC_DISABLE:
      Disable(*ev);
      return 0;
    case PERF_EVENT_IOC_ID:
      *reinterpret_cast<uint64_t*>(argument) = ev->pub.id;  // primary_event_id()
      return 0;
    case PERF_EVENT_IOC_SET_OUTPUT:
      return SetOutput(*ev, static_cast<int>(argument));
    case PERF_EVENT_IOC_SET_FILTER:
      return SetFilter(*ev, reinterpret_cast<const char*>(argument));
    default:
      return Fail(ENOTTY);
  }
}

int KernelModel::SetOutput(Ev& ev, int output_fd) {
  // perf_event_set_output().
  Ev* out = Find(output_fd);
  if (out == nullptr) return Fail(EBADF);
  if (out == &ev) return Fail(EINVAL);                 // no circular references
  if (out->pub.cpu != ev.pub.cpu) return Fail(EINVAL);  // no cross-CPU buffers
  // A per-task buffer must belong to the same task.
  if (out->pub.cpu == -1 && out->pub.pid != ev.pub.pid) return Fail(EINVAL);
  if (ev.rb != nullptr && ev.rb->mmap_count > 0 && ev.pub.output_fd < 0) {
    return Fail(EINVAL);  // "Can't redirect output if we've got an active mmap()"
  }
  if (out->rb == nullptr) return Fail(EINVAL);  // ring_buffer_get(output_event)
  ev.rb = out->rb;  // ring_buffer_attach()
  ev.pub.output_fd = output_fd;
  return 0;
}

int KernelModel::SetFilter(Ev& ev, const char* text) {
  // perf_event_set_filter(): only events whose PMU has address filters.
  if (!ev.pub.pt || host_.num_address_ranges == 0) return Fail(EINVAL);
  // perf_event_parse_addr_filter(): "ACTION RANGE_SPEC" items separated by spaces, commas or
  // newlines; RANGE_SPEC is ADDR[/SIZE][@FILE].
  std::vector<std::string> tokens;
  std::string token;
  for (const char* p = text;; ++p) {
    if (*p == ' ' || *p == ',' || *p == '\n' || *p == '\0') {
      if (!token.empty()) tokens.push_back(token);
      token.clear();
      if (*p == '\0') break;
    } else {
      token += *p;
    }
  }
  if (tokens.size() % 2 != 0) return Fail(EINVAL);  // a definition left half-parsed
  std::vector<std::string> filters;
  for (size_t i = 0; i < tokens.size(); i += 2) {
    const std::string& action = tokens[i];
    if (action != "filter" && action != "start" && action != "stop") return Fail(EINVAL);
    std::string spec = tokens[i + 1];
    std::string file;
    if (size_t at = spec.find('@'); at != std::string::npos) {
      file = spec.substr(at + 1);
      spec = spec.substr(0, at);
    }
    uint64_t size = 0;
    if (size_t slash = spec.find('/'); slash != std::string::npos) {
      char* end = nullptr;
      size = std::strtoull(spec.c_str() + slash + 1, &end, 0);  // kstrtoul(.., 0, ..)
      if (*end != '\0') return Fail(EINVAL);
      spec = spec.substr(0, slash);
    }
    char* end = nullptr;
    std::strtoull(spec.c_str(), &end, 0);
    if (spec.empty() || *end != '\0') return Fail(EINVAL);
    // "ACTION filter must have a non-zero length region specified".
    if (action == "filter" && size == 0) return Fail(EINVAL);
    if (file.empty()) {
      // A kernel address: needs kernel tracing, not modelled beyond the parse.
    } else {
      // File-based filters only in per-task events (ctx->task): EOPNOTSUPP for CPU-wide ones;
      // kern_path(LOOKUP_FOLLOW) must find a regular file.
      if (ev.pub.pid == -1) return Fail(EOPNOTSUPP);
      struct stat st {};
      if (::stat(file.c_str(), &st) != 0) return Fail(ENOENT);
      if (!S_ISREG(st.st_mode)) return Fail(EINVAL);
    }
    // pt_event_addr_filters_validate(): no single-address filters, no "start" filters, at most
    // caps/num_address_ranges ranges.
    if (size == 0 || action == "start") return Fail(EOPNOTSUPP);
    filters.push_back(tokens[i] + " " + tokens[i + 1]);
  }
  if (filters.size() > host_.num_address_ranges) return Fail(EOPNOTSUPP);
  ev.pub.filters = filters;
  return 0;
}

int KernelModel::Close(int fd) {
  Ev* ev = Find(fd);
  if (ev == nullptr) return ::close(fd);
  // perf_release(): the event is removed from its context (scheduled out first).
  if (ev->hw_active) StopPtOf(*ev);
  for (auto& [other_fd, other] : events_) {
    if (other->pub.output_fd == fd) other->pub.output_fd = -1;
  }
  events_.erase(fd);
  return ::close(fd);
}

int KernelModel::Poll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask) {
  if (on_poll) on_poll(*this);
  // perf_poll(): POLLHUP once the event's task exited (perf_event_exit_event), POLLIN when the
  // buffer has data (rb->poll, set by perf_output_wakeup; the model does not wait for the
  // watermark).
  int ready = 0;
  std::vector<pollfd> real;
  std::vector<size_t> real_index;
  for (nfds_t i = 0; i < count; ++i) {
    fds[i].revents = 0;
    Ev* ev = Find(fds[i].fd);
    if (ev == nullptr) {
      real.push_back(fds[i]);
      real_index.push_back(i);
      continue;
    }
    if (ev->pub.exited) fds[i].revents |= POLLHUP;
    if (ev->rb != nullptr && ev->rb->base != nullptr &&
        ev->rb->page->data_head != ev->rb->page->data_tail) {
      fds[i].revents |= static_cast<short>(fds[i].events & POLLIN);
    }
    if (fds[i].revents != 0) ++ready;
  }
  timespec wait{0, 0};
  if (ready == 0) {
    const int64_t cap_ns = int64_t{host_.max_poll_wait_ms} * 1000000;
    const int64_t asked =
        timeout == nullptr ? cap_ns : int64_t{timeout->tv_sec} * 1000000000 + timeout->tv_nsec;
    const int64_t ns = std::min(asked, cap_ns);
    wait = {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  }
  const int real_ready = ::ppoll(real.data(), real.size(), &wait, mask);
  if (real_ready < 0) return -1;  // EINTR: a signal
  for (size_t j = 0; j < real.size(); ++j) fds[real_index[j]].revents = real[j].revents;
  return ready + real_ready;
}

}  // namespace ptscope::record::testing
