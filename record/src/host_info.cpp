#include "host_info.h"

#include <cpuid.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>

#include "perf_event.h"
#include "proc_maps.h"
#include "ring_budget.h"

namespace ptscope::record {
namespace {

// Measured (scripts/bench_emulate): gzip under pt-emulate, ~47,000 instructions/s, 55,000x slower.
constexpr const char* kEmulateHint =
    "use pt-emulate here instead (software, ~50,000 instructions/s: tens of thousands of times "
    "slower)";

std::optional<CpuidRegs> Cpuid(uint32_t leaf, uint32_t subleaf) {
  CpuidRegs r;
  if (__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) == 0) return std::nullopt;
  return r;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t start = s.find_first_not_of(" \t");
  return start == std::string::npos ? std::string() : s.substr(start);
}

template <typename T>
std::optional<T> ParseNumber(const std::string& text, int base = 10) {
  std::string t = Trim(text);
  T value{};
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value, base);
  if (ec != std::errc() || ptr != t.data() + t.size() || t.empty()) return std::nullopt;
  return value;
}

template <typename T>
std::optional<T> ReadNumberFile(const std::string& path) {
  auto text = ReadProcFile(path);
  if (!text) return std::nullopt;
  return ParseNumber<T>(*text);
}

bool Exists(const char* path) {
  struct stat st {};
  return stat(path, &st) == 0;
}

std::string Cap(const HostFacts& f, const char* name) {
  auto it = f.pt.caps.find(name);
  return it == f.pt.caps.end() ? "?" : it->second;
}

}  // namespace

CpuIdentity ReadCpuIdentity() {
  CpuIdentity id;
  auto leaf0 = Cpuid(0, 0);
  if (!leaf0) return id;
  char vendor[13] = {};
  for (int i = 0; i < 4; ++i) {
    vendor[i] = static_cast<char>(leaf0->ebx >> (8 * i));
    vendor[4 + i] = static_cast<char>(leaf0->edx >> (8 * i));
    vendor[8 + i] = static_cast<char>(leaf0->ecx >> (8 * i));
  }
  id.vendor = vendor;
  uint32_t max_leaf = leaf0->eax;
  if (auto leaf1 = Cpuid(1, 0)) {
    uint32_t base_family = (leaf1->eax >> 8) & 0xf;
    uint32_t base_model = (leaf1->eax >> 4) & 0xf;
    id.stepping = leaf1->eax & 0xf;
    id.family = base_family == 0xf ? base_family + ((leaf1->eax >> 20) & 0xff) : base_family;
    id.model = (base_family == 0x6 || base_family == 0xf)
                   ? base_model | (((leaf1->eax >> 16) & 0xf) << 4)
                   : base_model;
    id.hypervisor = (leaf1->ecx >> 31) & 1;
  }
  if (max_leaf >= 7) {
    if (auto leaf7 = Cpuid(7, 0)) id.has_intel_pt = (leaf7->ebx >> 25) & 1;
  }
  if (max_leaf >= 0x14 && id.has_intel_pt) id.leaf14 = Cpuid(0x14, 0);
  if (max_leaf >= 0x15) id.leaf15 = Cpuid(0x15, 0);
  return id;
}

PtPmu ReadPtPmu(const std::string& sysfs_dir) {
  PtPmu pmu;
  auto type = ReadProcFile(sysfs_dir + "/type");
  if (!type) {
    pmu.error = sysfs_dir + " does not exist";
    if (type.error().code != Errc::kNotFound) pmu.error = type.error().message;
    return pmu;
  }
  auto value = ParseNumber<uint32_t>(*type);
  if (!value) {
    pmu.error = sysfs_dir + "/type holds '" + Trim(*type) + "', not a number";
    return pmu;
  }
  pmu.present = true;
  pmu.type = *value;
  pmu.max_nonturbo_ratio = ReadNumberFile<uint32_t>(sysfs_dir + "/max_nonturbo_ratio");
  std::string caps_dir = sysfs_dir + "/caps";
  if (DIR* dir = opendir(caps_dir.c_str())) {
    while (dirent* ent = readdir(dir)) {
      std::string name = ent->d_name;
      if (name == "." || name == "..") continue;
      if (auto text = ReadProcFile(caps_dir + "/" + name)) pmu.caps[name] = Trim(*text);
    }
    closedir(dir);
  }
  return pmu;
}

Result<uint64_t> ParseCapEff(const std::string& status_text) {
  size_t at = status_text.find("\nCapEff:");
  if (at == std::string::npos)
    return MakeError(Errc::kCorrupt, "/proc/self/status: no CapEff line");
  size_t start = at + 8;
  size_t end = status_text.find('\n', start);
  auto value = ParseNumber<uint64_t>(status_text.substr(start, end - start), 16);
  if (!value) return MakeError(Errc::kCorrupt, "/proc/self/status: CapEff is not hexadecimal");
  return *value;
}

std::pair<int, int> KernelVersion(const std::string& release) {
  int major = 0, minor = 0;
  if (std::sscanf(release.c_str(), "%d.%d", &major, &minor) != 2) return {0, 0};
  return {major, minor};
}

HostFacts GatherHostFacts() {
  HostFacts f;
  f.cpu = ReadCpuIdentity();
  f.pt = ReadPtPmu();
  utsname uts{};
  if (uname(&uts) == 0) {
    f.kernel_release = uts.release;
    f.host_name = uts.nodename;
  }
  f.perf_event_paranoid = ReadNumberFile<int>("/proc/sys/kernel/perf_event_paranoid");
  f.perf_event_mlock_kb = ReadNumberFile<uint64_t>("/proc/sys/kernel/perf_event_mlock_kb");
  f.privileges.uid = getuid();
  f.privileges.euid = geteuid();
  if (auto status = ReadProcFile("/proc/self/status"))
    if (auto cap = ParseCapEff(*status)) f.privileges.cap_effective = *cap;
  if (auto cpus = OnlineCpus()) f.online_cpus = *cpus;
  rlimit memlock{};
  if (getrlimit(RLIMIT_MEMLOCK, &memlock) == 0 && memlock.rlim_cur != RLIM_INFINITY)
    f.rlimit_memlock = memlock.rlim_cur;
  if (Exists("/.dockerenv")) f.container_hints.push_back("/.dockerenv exists");
  if (Exists("/run/.containerenv")) f.container_hints.push_back("/run/.containerenv exists");
  if (auto cgroup = ReadProcFile("/proc/1/cgroup")) {
    for (const char* word : {"docker", "kubepods", "lxc", "containerd"})
      if (cgroup->find(word) != std::string::npos)
        f.container_hints.push_back(std::string("/proc/1/cgroup mentions ") + word);
  }
  return f;
}

std::optional<std::string> NoIntelPtMessage(const HostFacts& f) {
  if (f.pt.present) return std::nullopt;
  return "no Intel PT on this host: " + f.pt.error + " (CPU: " + f.cpu.vendor + " family " +
         std::to_string(f.cpu.family) + " model " + std::to_string(f.cpu.model) +
         (f.cpu.hypervisor ? ", in a VM" : "") + "); " + kEmulateHint +
         ", or pt-record --sideband-only";
}

namespace {

CheckLine CpuLine(const HostFacts& f) {
  CheckLine l{.ok = f.cpu.vendor == "GenuineIntel" && f.cpu.has_intel_pt, .fatal = false,
              .name = "cpu", .detail = f.cpu.vendor + " family " + std::to_string(f.cpu.family) +
                                       " model " + std::to_string(f.cpu.model) + " stepping " +
                                       std::to_string(f.cpu.stepping), .fix = {}};
  l.detail += f.cpu.has_intel_pt ? ", cpuid 7.0 reports Intel PT" : ", no Intel PT in cpuid 7.0";
  if (!l.ok) {
    l.fatal = true;
    l.fix = "Intel PT needs an Intel CPU from Broadwell on; record on such a host, or " +
            std::string(kEmulateHint);
  }
  return l;
}

CheckLine HypervisorLine(const HostFacts& f) {
  CheckLine l{.ok = !f.cpu.hypervisor || f.pt.present, .fatal = false, .name = "hypervisor",
              .detail = f.cpu.hypervisor ? "running in a VM" : "none (bare metal)", .fix = {}};
  if (!l.ok)
    l.fix = "VMs expose PT only with passthrough (KVM: -cpu host with intel-pt); most clouds do not";
  return l;
}

CheckLine PmuLine(const HostFacts& f) {
  CheckLine l{.ok = f.pt.present, .fatal = !f.pt.present, .name = "intel_pt PMU", .detail = {},
              .fix = {}};
  if (f.pt.present) {
    l.detail = "type " + std::to_string(f.pt.type) + ", caps psb_cyc=" + Cap(f, "psb_cyc") +
               " mtc=" + Cap(f, "mtc") + " ip_filtering=" + Cap(f, "ip_filtering") +
               " num_address_ranges=" + Cap(f, "num_address_ranges") +
               " topa_multiple_entries=" + Cap(f, "topa_multiple_entries");
  } else {
    l.detail = f.pt.error;
    l.fix = "the kernel has no Intel PT PMU (needs PT hardware and CONFIG_CPU_SUP_INTEL; in a VM, "
            "PT passthrough); " + std::string(kEmulateHint);
  }
  return l;
}

CheckLine KernelLine(const HostFacts& f) {
  auto [major, minor] = KernelVersion(f.kernel_release);
  bool has_pt = major > 4 || (major == 4 && minor >= 2);
  bool has_build_id = major > 5 || (major == 5 && minor >= 12);
  CheckLine l{.ok = has_build_id, .fatal = !has_pt, .name = "kernel", .detail = f.kernel_release,
              .fix = {}};
  if (!has_pt) l.fix = "Intel PT snapshot recording needs Linux 4.2 or newer";
  else if (!has_build_id)
    l.fix = "Linux < 5.12 has no build ids in MMAP2 records; pt-record reads them from the files "
            "(upgrade for exactness when files change during the capture)";
  else
    l.detail += " (>= 5.12: build ids in MMAP2 sideband)";
  return l;
}

CheckLine ParanoidLine(const HostFacts& f, const RecordingNeeds& needs) {
  int limit = needs.all_cpus ? 0 : needs.kernel ? 1 : 2;
  CheckLine l{.ok = true, .fatal = false, .name = "perf_event_paranoid", .detail = {}, .fix = {}};
  if (!f.perf_event_paranoid) {
    l.ok = false;
    l.fatal = !f.privileges.perf_privileged();
    l.detail = "/proc/sys/kernel/perf_event_paranoid is unreadable (perf_event_open unsupported?)";
    l.fix = "use a kernel with CONFIG_PERF_EVENTS";
    return l;
  }
  l.detail = std::to_string(*f.perf_event_paranoid);
  if (f.privileges.perf_privileged()) {
    l.detail += " (does not apply: privileged)";
  } else if (*f.perf_event_paranoid > limit) {
    l.ok = false;
    l.fatal = true;
    l.fix = "needs <= " + std::to_string(limit) + " for this kind of recording: sysctl "
            "kernel.perf_event_paranoid=" + std::to_string(limit) +
            ", or setcap cap_perfmon,cap_ipc_lock+ep pt-record, or run as root";
  }
  return l;
}

CheckLine PrivilegeLine(const HostFacts& f) {
  const Privileges& p = f.privileges;
  std::string what = p.root() ? "root" : "uid " + std::to_string(p.euid);
  if (p.cap_perfmon()) what += ", CAP_PERFMON";
  if (p.cap_sys_admin()) what += ", CAP_SYS_ADMIN";
  if (p.cap_ipc_lock()) what += ", CAP_IPC_LOCK";
  char capeff[32];
  std::snprintf(capeff, sizeof capeff, " (CapEff %016llx)",
                static_cast<unsigned long long>(p.cap_effective));
  return CheckLine{.ok = true, .fatal = false, .name = "privileges", .detail = what + capeff,
                   .fix = {}};
}

// Both limits of perf_mmap()'s accounting (ring_budget.h), and the rings this recording would
// map: what fits, shrunk if need be, or what is missing.
CheckLine MlockLine(const HostFacts& f, const RecordingNeeds& needs) {
  CheckLine l{.ok = true, .fatal = false, .name = "locked memory", .detail = {}, .fix = {}};
  const LockedBudget budget = BudgetOf(f);
  RingCounts counts;
  counts.sideband = f.online_cpus.empty() ? 1 : f.online_cpus.size();
  counts.pt = needs.all_cpus ? counts.sideband : needs.threads;
  counts.breakpoints = needs.trigger ? needs.threads : 0;
  Result<RingPlan> plan = PlanRings(budget, counts, needs.aux_bytes, needs.aux_is_default);
  l.detail = "this user may lock " + budget.Describe();
  if (!plan) {
    l.ok = false;
    l.fatal = true;
    l.fix = plan.error().message;
    return l;
  }
  const uint64_t page_kb = PageSize() / 1024;
  l.detail += "; a recording of " + std::to_string(counts.pt) + (needs.all_cpus ? " CPU" : " thread") +
              (counts.pt == 1 ? "" : "s") + " maps " +
              std::to_string(plan->LockedPages(counts) * page_kb) + " KiB (AUX " +
              std::to_string(plan->aux_pages * page_kb) + " KiB per event" +
              (plan->aux_pages * PageSize() < needs.aux_bytes ? ", shrunk to fit" : "") + ")";
  if (plan->aux_pages * PageSize() < needs.aux_bytes) {
    l.ok = false;  // records, with less trace per snapshot than asked: a WARN, not an OK
    l.fix = "raise kernel.perf_event_mlock_kb or ulimit -l (or run with CAP_IPC_LOCK) for the "
            "whole AUX area";
  }
  return l;
}

CheckLine ContainerLine(const HostFacts& f) {
  CheckLine l{.ok = true, .fatal = false, .name = "container", .detail = "none detected", .fix = {}};
  if (!f.container_hints.empty()) {
    // Not fatal (the PMU and paranoid lines decide), but not OK either: a warning.
    l.ok = false;
    l.detail = f.container_hints.front();
    for (size_t i = 1; i < f.container_hints.size(); ++i) l.detail += ", " + f.container_hints[i];
    l.fix = "perf_event_open may be blocked: docker needs --cap-add PERFMON or a seccomp profile "
            "allowing perf_event_open";
  }
  return l;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> CpuMetadata(const CpuIdentity& cpu) {
  return {{"cpu.vendor", cpu.vendor},
          {"cpu.family", std::to_string(cpu.family)},
          {"cpu.model", std::to_string(cpu.model)},
          {"cpu.stepping", std::to_string(cpu.stepping)}};
}

std::vector<std::pair<std::string, std::string>> PtHostMetadata(const HostFacts& f) {
  std::vector<std::pair<std::string, std::string>> m;
  if (f.cpu.leaf15) {
    m.emplace_back("pt.cpuid15_eax", std::to_string(f.cpu.leaf15->eax));
    m.emplace_back("pt.cpuid15_ebx", std::to_string(f.cpu.leaf15->ebx));
  }
  if (f.pt.max_nonturbo_ratio)
    m.emplace_back("pt.max_nonturbo_ratio", std::to_string(*f.pt.max_nonturbo_ratio));
  for (const auto& [name, value] : f.pt.caps) m.emplace_back("pt.caps." + name, value);
  return m;
}

std::vector<CheckLine> EvaluateHost(const HostFacts& f, const RecordingNeeds& needs) {
  return {CpuLine(f),       HypervisorLine(f),      PmuLine(f),       KernelLine(f),
          ParanoidLine(f, needs), PrivilegeLine(f), MlockLine(f, needs), ContainerLine(f)};
}

bool CanRecord(const std::vector<CheckLine>& lines) {
  for (const CheckLine& l : lines)
    if (l.fatal) return false;
  return true;
}

std::string FormatCheckLine(const CheckLine& line) {
  // Three states, never mixed in one line: OK, WARN (recording works, with a caveat), MISSING.
  std::string state = line.ok ? "OK      " : line.fatal ? "MISSING " : "WARN    ";
  std::string text = state + line.name + ": " + line.detail;
  if (!line.ok && !line.fix.empty()) text += " -- fix: " + line.fix;
  return text;
}

}  // namespace ptscope::record
