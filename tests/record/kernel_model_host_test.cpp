// The kernel model against the kernel of the machine running the tests, for every rule that is
// not specific to Intel PT: the same calls, on the same kinds of events (software dummy events,
// which every x86 host has), must give the same results. tests/record/kernel_model_host_test.sh
// runs this as root and again as an unprivileged user with a small `ulimit -l`, so that the
// locked-page accounting is compared too.
#include <doctest/doctest.h>

#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "kernel_model.h"
#include "perf_ring.h"
#include "ptscope/perf_records.h"

namespace ptscope::record::testing {
namespace {

// The model configured as this host is.
ModelHost ThisHost() {
  ModelHost host;
  host.ncpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  std::ifstream("/proc/sys/kernel/perf_event_mlock_kb") >> host.perf_event_mlock_kb;
  std::ifstream("/proc/sys/kernel/perf_event_paranoid") >> host.paranoid;
  rlimit memlock{};
  ::getrlimit(RLIMIT_MEMLOCK, &memlock);
  host.rlimit_memlock = memlock.rlim_cur == RLIM_INFINITY ? UINT64_MAX : memlock.rlim_cur;
  host.cap_ipc_lock = host.perfmon = ::geteuid() == 0;
  utsname uts{};
  ::uname(&uts);
  std::sscanf(uts.release, "%d.%d", &host.kernel_major, &host.kernel_minor);
  host.pt_type = 0;  // no intel_pt here: the comparisons use software events
  return host;
}

perf_event_attr Dummy() {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.disabled = 1;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER;
  attr.sample_id_all = 1;
  return attr;
}

const long kPage = ::sysconf(_SC_PAGESIZE);

// errno of a failed call, 0 for success.
int Errno(int result) { return result < 0 ? errno : 0; }

// Runs `scenario` on the real kernel and on the model; both must report the same results.
void Same(const char* what, const std::function<std::vector<int>(PerfKernel&)>& scenario) {
  KernelModel model(ThisHost());
  std::vector<int> real = scenario(SystemPerfKernel());
  std::vector<int> modelled = scenario(model);
  INFO(what);
  CHECK(modelled == real);
}

// Opens a dummy event for this process on `cpu`; the result (or -errno) and the fd.
struct Opened {
  int err = 0;
  int fd = -1;
};
Opened OpenDummy(PerfKernel& k, perf_event_attr attr, int pid = 0, int cpu = -1) {
  int fd = k.Open(attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  return {fd < 0 ? errno : 0, fd};
}

TEST_CASE("host: attr checks (reserved bits, CPU, task) give the kernel's errors") {
  Same("a reserved attr flag bit: EINVAL (perf_copy_attr)", [](PerfKernel& k) {
    perf_event_attr attr = Dummy();
    uint64_t word = 0;
    std::memcpy(&word, reinterpret_cast<char*>(&attr) + 40, 8);
    word |= uint64_t{1} << 63;
    std::memcpy(reinterpret_cast<char*>(&attr) + 40, &word, 8);
    Opened o = OpenDummy(k, attr);
    if (o.fd >= 0) k.Close(o.fd);
    return std::vector<int>{o.err};
  });
  Same("no task and no CPU: EINVAL (perf_event_alloc)", [](PerfKernel& k) {
    Opened o = OpenDummy(k, Dummy(), -1, -1);
    if (o.fd >= 0) k.Close(o.fd);
    return std::vector<int>{o.err};
  });
  Same("a CPU far beyond the online ones: EINVAL", [](PerfKernel& k) {
    Opened o = OpenDummy(k, Dummy(), 0, 4000);
    if (o.fd >= 0) k.Close(o.fd);
    return std::vector<int>{o.err};
  });
  Same("a task that does not exist: ESRCH (find_lively_task_by_vpid)", [](PerfKernel& k) {
    Opened o = OpenDummy(k, Dummy(), 4194303, -1);  // above every pid_max default
    if (o.fd >= 0) k.Close(o.fd);
    return std::vector<int>{o.err};
  });
  Same("a valid per-task dummy event opens", [](PerfKernel& k) {
    Opened o = OpenDummy(k, Dummy());
    if (o.fd >= 0) k.Close(o.fd);
    return std::vector<int>{o.err};
  });
}

TEST_CASE("host: the model's known attr flags are those of this kernel") {
  // A flag this kernel knows is accepted by both; one it does not (the next bit) by neither.
  KernelModel model(ThisHost());
  const ModelHost host = ThisHost();
  const uint64_t known = KernelModel::KnownAttrFlags(host.kernel_major, host.kernel_minor);
  const int highest = 63 - __builtin_clzll(known);
  for (int bit : {highest, highest + 1}) {
    std::vector<int> results;
    for (PerfKernel* k : {static_cast<PerfKernel*>(&SystemPerfKernel()), static_cast<PerfKernel*>(&model)}) {
      perf_event_attr attr = Dummy();
      uint64_t word = 0;
      std::memcpy(&word, reinterpret_cast<char*>(&attr) + 40, 8);
      word |= uint64_t{1} << bit;
      std::memcpy(reinterpret_cast<char*>(&attr) + 40, &word, 8);
      Opened o = OpenDummy(*k, attr);
      if (o.fd >= 0) k->Close(o.fd);
      // A known flag may still be refused for its meaning (EINVAL/EACCES for sigtrap without
      // remove_on_exec...): what matters is that both agree.
      results.push_back(o.err);
    }
    INFO("flag bit " << bit);
    CHECK(results[0] == results[1]);
  }
}

TEST_CASE("host: mmap rules (page counts, inherit, AUX on a PMU without one)") {
  Same("data pages not a power of two: EINVAL (perf_mmap)", [](PerfKernel& k) {
    Opened o = OpenDummy(k, Dummy());
    void* base = k.Map(o.fd, static_cast<size_t>(4 * kPage), PROT_READ | PROT_WRITE, 0);
    const int err = base == MAP_FAILED ? errno : 0;
    if (base != MAP_FAILED) k.Unmap(base, static_cast<size_t>(4 * kPage));
    k.Close(o.fd);
    return std::vector<int>{err};
  });
  Same("an inherited per-task event cannot be mapped: EINVAL", [](PerfKernel& k) {
    perf_event_attr attr = Dummy();
    attr.inherit = 1;
    Opened o = OpenDummy(k, attr);
    void* base = k.Map(o.fd, static_cast<size_t>(2 * kPage), PROT_READ | PROT_WRITE, 0);
    const int err = base == MAP_FAILED ? errno : 0;
    if (base != MAP_FAILED) k.Unmap(base, static_cast<size_t>(2 * kPage));
    k.Close(o.fd);
    return std::vector<int>{o.err, err};
  });
  Same("an AUX area for an event without one: EOPNOTSUPP (rb_alloc_aux)", [](PerfKernel& k) {
    Opened o = OpenDummy(k, Dummy());
    const size_t data = static_cast<size_t>(2 * kPage);
    void* base = k.Map(o.fd, data, PROT_READ | PROT_WRITE, 0);
    int err = base == MAP_FAILED ? errno : 0;
    if (base != MAP_FAILED) {
      auto* page = static_cast<perf_event_mmap_page*>(base);
      page->aux_offset = data;
      page->aux_size = static_cast<uint64_t>(4 * kPage);
      void* aux = k.Map(o.fd, static_cast<size_t>(4 * kPage), PROT_READ, static_cast<off_t>(data));
      err = aux == MAP_FAILED ? errno : 0;
      if (aux != MAP_FAILED) k.Unmap(aux, static_cast<size_t>(4 * kPage));
      k.Unmap(base, data);
    }
    k.Close(o.fd);
    return std::vector<int>{err};
  });
}

TEST_CASE("host: SET_OUTPUT rules (same CPU, a buffer to go to, no mapped source)") {
  Same("redirection across CPUs, into nothing, from a mapped event", [](PerfKernel& k) {
    std::vector<int> results;
    Opened on0 = OpenDummy(k, Dummy(), 0, 0);
    Opened on0b = OpenDummy(k, Dummy(), 0, 0);
    Opened on1 = OpenDummy(k, Dummy(), 0, ::sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0);
    // into an event that has no buffer yet
    results.push_back(Errno(k.Ioctl(on0b.fd, PERF_EVENT_IOC_SET_OUTPUT, static_cast<unsigned long>(on0.fd))));
    const size_t size = static_cast<size_t>(2 * kPage);
    void* base = k.Map(on0.fd, size, PROT_READ | PROT_WRITE, 0);
    results.push_back(base == MAP_FAILED ? errno : 0);
    // into it from the same CPU: fine; from another CPU: EINVAL
    results.push_back(Errno(k.Ioctl(on0b.fd, PERF_EVENT_IOC_SET_OUTPUT, static_cast<unsigned long>(on0.fd))));
    if (::sysconf(_SC_NPROCESSORS_ONLN) > 1) {
      results.push_back(Errno(k.Ioctl(on1.fd, PERF_EVENT_IOC_SET_OUTPUT, static_cast<unsigned long>(on0.fd))));
    }
    // the mapped event itself cannot be redirected
    results.push_back(Errno(k.Ioctl(on0.fd, PERF_EVENT_IOC_SET_OUTPUT, static_cast<unsigned long>(on1.fd))));
    if (base != MAP_FAILED) k.Unmap(base, size);
    for (int fd : {on0.fd, on0b.fd, on1.fd}) k.Close(fd);
    return results;
  });
}

TEST_CASE("host: RLIMIT_NOFILE bounds event descriptors (EMFILE)") {
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  Same("opening events past ulimit -n", [&](PerfKernel& k) {
    rlimit low = old;
    low.rlim_cur = 64;
    ::setrlimit(RLIMIT_NOFILE, &low);
    std::vector<int> fds;
    int err = 0;
    for (int i = 0; i < 100 && err == 0; ++i) {
      Opened o = OpenDummy(k, Dummy());
      err = o.err;
      if (o.fd >= 0) fds.push_back(o.fd);
    }
    ::setrlimit(RLIMIT_NOFILE, &old);
    for (int fd : fds) k.Close(fd);
    return std::vector<int>{err};
  });
}

// Pages (data + header) the calls in `sizes` map, one dummy event each; the errno of each mmap.
std::vector<int> MapRings(PerfKernel& k, const std::vector<int>& data_pages) {
  std::vector<int> results;
  std::vector<std::pair<void*, size_t>> maps;
  std::vector<int> fds;
  for (int pages : data_pages) {
    Opened o = OpenDummy(k, Dummy());
    fds.push_back(o.fd);
    const size_t size = static_cast<size_t>((pages + 1) * kPage);
    void* base = k.Map(o.fd, size, PROT_READ | PROT_WRITE, 0);
    results.push_back(base == MAP_FAILED ? errno : 0);
    if (base != MAP_FAILED) maps.emplace_back(base, size);
  }
  for (auto [base, size] : maps) k.Unmap(base, size);
  for (int fd : fds) k.Close(fd);
  return results;
}

TEST_CASE("host: locked-page accounting (perf_event_mlock_kb per CPU, then RLIMIT_MEMLOCK)") {
  const ModelHost host = ThisHost();
  const int budget = static_cast<int>(host.perf_event_mlock_kb / (kPage / 1024)) * host.ncpus;
  const int rlimit_pages = host.rlimit_memlock == UINT64_MAX ? 1 << 20
                                                             : static_cast<int>(host.rlimit_memlock / kPage);
  INFO("euid " << ::geteuid() << ", budget " << budget << " pages, RLIMIT_MEMLOCK "
               << rlimit_pages << " pages");
  // Rings that fill the per-user budget exactly, then RLIMIT_MEMLOCK exactly, then one page more
  // (EPERM unless exempt: root, CAP_IPC_LOCK). A ring is 1 + 0 or a power of two pages.
  std::vector<int> rings;
  auto fill = [&](int left) {
    while (left >= 2) {
      int pages = 1;
      while (pages * 2 + 1 <= left && pages < 512) pages *= 2;
      rings.push_back(pages);
      left -= pages + 1;
    }
    if (left == 1) rings.push_back(0);
  };
  fill(budget);
  if (rlimit_pages < 1 << 20) {
    fill(rlimit_pages);
    rings.push_back(0);
  }
  const std::vector<int> real = MapRings(SystemPerfKernel(), rings);
  KernelModel model(host);
  CHECK(MapRings(model, rings) == real);
  // The comparison means something only if the last ring went past what was allowed.
  if (::geteuid() != 0 && rlimit_pages < 1 << 20) CHECK(real.back() == EPERM);
}

// Context-switch records of this thread into a one-page ring that nobody drains: the kernel
// counts what it drops and, once there is room again, writes PERF_RECORD_LOST first.
std::vector<uint32_t> SwitchFlood(PerfKernel& k, KernelModel* model) {
  perf_event_attr attr = Dummy();
  attr.context_switch = 1;
  attr.disabled = 0;
  Opened o = OpenDummy(k, attr);
  const size_t size = static_cast<size_t>(2 * kPage);
  void* base = k.Map(o.fd, size, PROT_READ | PROT_WRITE, 0);
  DataRingView ring{static_cast<perf_event_mmap_page*>(base),
                    static_cast<uint8_t*>(base) + kPage, static_cast<uint64_t>(kPage)};
  const int self = ::getpid();
  auto switch_once = [&] {
    if (model != nullptr) {
      model->SchedOut(self);
      model->SchedIn(self, self, 0);
    } else {
      timespec ms{0, 100000};
      ::nanosleep(&ms, nullptr);  // sleeping: a switch out and a switch in
    }
  };
  if (model != nullptr) model->SchedIn(self, self, 0);
  for (int i = 0; i < 400; ++i) switch_once();  // ~32 KiB of records for a 4 KiB ring
  std::vector<uint8_t> records;
  DrainDataRing(ring, &records);                // room again
  records.clear();
  switch_once();
  DrainDataRing(ring, &records);
  std::vector<uint32_t> types;
  perf::RecordIterator it(records, perf::RecordLayout{attr.sample_type, true});
  while (auto next = it.Next()) {
    if (!*next) break;
    types.push_back(next->value().type);
    if (next->value().type == perf::kRecordLost) {
      CHECK(std::get<perf::LostRecord>(next->value().body).lost > 0);
    }
  }
  k.Unmap(base, size);
  k.Close(o.fd);
  return types;
}

TEST_CASE("host: a full data ring drops records and then writes PERF_RECORD_LOST first") {
  std::vector<uint32_t> real = SwitchFlood(SystemPerfKernel(), nullptr);
  KernelModel model(ThisHost());
  std::vector<uint32_t> modelled = SwitchFlood(model, &model);
  REQUIRE(!real.empty());
  CHECK(real.front() == perf::kRecordLost);
  CHECK(modelled.front() == perf::kRecordLost);
  CHECK(modelled == std::vector<uint32_t>{perf::kRecordLost, perf::kRecordSwitch,
                                          perf::kRecordSwitch});
}

}  // namespace
}  // namespace ptscope::record::testing
