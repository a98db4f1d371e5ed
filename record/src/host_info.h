// Facts about the recording host: CPU identity (cpuid), the intel_pt PMU and its caps (sysfs),
// perf sysctls, privileges and container hints. Used by `pt-record --check`, by the refusal
// message on hosts without PT, and for the archive metadata (cpu.*, pt.caps.*, kernel.release).
// Gathering is separate from judging (EvaluateHost) so the verdicts are unit-tested on made-up
// hosts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::record {

inline constexpr const char* kIntelPtSysfsDir = "/sys/bus/event_source/devices/intel_pt";

struct CpuidRegs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

struct CpuIdentity {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  uint32_t family = 0, model = 0, stepping = 0;  // display family/model (extended fields folded in)
  bool hypervisor = false;   // cpuid 1 ecx bit 31: running in a VM
  bool has_intel_pt = false; // cpuid 7.0 ebx bit 25
  std::optional<CpuidRegs> leaf14;  // Intel PT capability leaf 0x14.0, when the CPU has it
  std::optional<CpuidRegs> leaf15;  // TSC / core crystal clock ratio 0x15, when present
};

CpuIdentity ReadCpuIdentity();

struct PtPmu {
  bool present = false;
  uint32_t type = 0;                         // the perf_event_attr.type to use
  std::map<std::string, std::string> caps;   // caps/<name> → value as text (trimmed)
  std::optional<uint32_t> max_nonturbo_ratio;
  std::string error;                         // why it is absent/unreadable
};

// Reads the PMU from `sysfs_dir` (kIntelPtSysfsDir normally; tests pass a fake tree).
PtPmu ReadPtPmu(const std::string& sysfs_dir = kIntelPtSysfsDir);

struct Privileges {
  uint32_t uid = 0, euid = 0;
  uint64_t cap_effective = 0;  // CapEff from /proc/self/status
  bool root() const { return euid == 0; }
  bool cap_sys_admin() const { return (cap_effective >> 21) & 1; }
  bool cap_ipc_lock() const { return (cap_effective >> 14) & 1; }
  bool cap_perfmon() const { return (cap_effective >> 38) & 1; }
  bool cap_sys_ptrace() const { return (cap_effective >> 19) & 1; }
  // What perf_event_open will allow beyond perf_event_paranoid.
  bool perf_privileged() const { return root() || cap_perfmon() || cap_sys_admin(); }
};

// Parses the CapEff line of /proc/PID/status text.
Result<uint64_t> ParseCapEff(const std::string& status_text);

struct HostFacts {
  CpuIdentity cpu;
  PtPmu pt;
  std::string kernel_release;
  std::string host_name;
  std::optional<int> perf_event_paranoid;
  std::optional<uint64_t> perf_event_mlock_kb;
  std::optional<uint64_t> rlimit_memlock;  // RLIMIT_MEMLOCK in bytes (ulimit -l); nullopt: unlimited
  Privileges privileges;
  std::vector<std::string> container_hints;  // e.g. "/.dockerenv exists"
  std::vector<int> online_cpus;              // /sys/devices/system/cpu/online
};

HostFacts GatherHostFacts();

// What the recording would need: decides which checks are fatal.
struct RecordingNeeds {
  bool kernel = false;        // --kernel
  bool all_cpus = false;      // -a
  uint64_t aux_bytes = 0;     // per PT event
  bool aux_is_default = true; // may shrink to fit the locked-memory budget (no --snapshot-size)
  uint64_t threads = 1;       // traced threads (per-thread recording)
  bool trigger = false;       // --trigger: one breakpoint ring per thread
};

struct CheckLine {
  bool ok = false;         // OK: nothing to say beyond the detail
  bool fatal = false;      // not ok and stops recording (MISSING); not ok otherwise is a WARN
  std::string name;        // "cpu", "intel_pt PMU", ...
  std::string detail;      // what we found
  std::string fix;         // what to do (MISSING lines)
};

std::vector<CheckLine> EvaluateHost(const HostFacts& facts, const RecordingNeeds& needs);
bool CanRecord(const std::vector<CheckLine>& lines);  // no fatal line
// "OK      name: detail", "WARN    name: detail -- fix: ...", "MISSING name: detail -- fix: ...".
std::string FormatCheckLine(const CheckLine& line);

// The one-line reason recording cannot start on a host without the PT PMU, pointing at
// pt-emulate; nullopt when the PMU is there.
std::optional<std::string> NoIntelPtMessage(const HostFacts& facts);

// Archive metadata: cpu.vendor, cpu.family, cpu.model, cpu.stepping.
std::vector<std::pair<std::string, std::string>> CpuMetadata(const CpuIdentity& cpu);
// Archive metadata of the host's Intel PT: pt.cpuid15_*, pt.max_nonturbo_ratio, pt.caps.*.
std::vector<std::pair<std::string, std::string>> PtHostMetadata(const HostFacts& facts);

// Kernel version "6.1.0-18-amd64" → {6, 1}; {0, 0} when unparsable.
std::pair<int, int> KernelVersion(const std::string& release);

}  // namespace ptscope::record
