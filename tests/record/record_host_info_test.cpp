#include "host_info.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace ptscope::record {
namespace {

HostFacts IntelHost() {
  HostFacts f;
  f.cpu.vendor = "GenuineIntel";
  f.cpu.family = 6;
  f.cpu.model = 85;
  f.cpu.stepping = 4;
  f.cpu.has_intel_pt = true;
  f.pt.present = true;
  f.pt.type = 9;
  f.pt.caps = {{"psb_cyc", "1"}, {"mtc", "1"}, {"ip_filtering", "1"},
               {"num_address_ranges", "2"}, {"topa_multiple_entries", "1"}};
  f.kernel_release = "6.1.0-18-amd64";
  f.perf_event_paranoid = 2;
  f.perf_event_mlock_kb = 516;
  f.privileges.uid = f.privileges.euid = 1000;
  return f;
}

HostFacts AmdVm() {
  HostFacts f = IntelHost();
  f.cpu.vendor = "AuthenticAMD";
  f.cpu.family = 25;
  f.cpu.model = 1;
  f.cpu.stepping = 1;
  f.cpu.has_intel_pt = false;
  f.cpu.hypervisor = true;
  f.pt = PtPmu{};
  f.pt.error = "/sys/bus/event_source/devices/intel_pt does not exist";
  f.privileges.uid = f.privileges.euid = 0;
  f.privileges.cap_effective = 0x1fffeffffff;
  f.container_hints = {"/.dockerenv exists"};
  return f;
}

const CheckLine& Line(const std::vector<CheckLine>& lines, const std::string& name) {
  for (const CheckLine& l : lines)
    if (l.name == name) return l;
  FAIL("no check line " << name);
  return lines.front();
}

}  // namespace

TEST_CASE("an unprivileged Intel host with paranoid 2 can record user-space per thread") {
  RecordingNeeds needs{.kernel = false, .all_cpus = false, .aux_bytes = 256 * 1024};
  auto lines = EvaluateHost(IntelHost(), needs);
  CHECK(CanRecord(lines));
  CHECK(FormatCheckLine(Line(lines, "intel_pt PMU")) ==
        "OK      intel_pt PMU: type 9, caps psb_cyc=1 mtc=1 ip_filtering=1 num_address_ranges=2 "
        "topa_multiple_entries=1");
  CHECK(FormatCheckLine(Line(lines, "cpu")) ==
        "OK      cpu: GenuineIntel family 6 model 85 stepping 4, cpuid 7.0 reports Intel PT");
}

TEST_CASE("paranoid and mlock limits depend on what is recorded and on privileges") {
  HostFacts f = IntelHost();
  auto kernel = EvaluateHost(f, {.kernel = true, .all_cpus = false, .aux_bytes = 256 * 1024});
  CHECK(!CanRecord(kernel));
  CHECK(FormatCheckLine(Line(kernel, "perf_event_paranoid")) ==
        "MISSING perf_event_paranoid: 2 -- fix: needs <= 1 for this kind of recording: sysctl "
        "kernel.perf_event_paranoid=1, or setcap cap_perfmon,cap_ipc_lock+ep pt-record, or run "
        "as root");
  f.rlimit_memlock = 64 * 1024;  // ulimit -l 64
  auto big = EvaluateHost(f, {.kernel = false, .all_cpus = false, .aux_bytes = 4 << 20,
                              .aux_is_default = false});
  CHECK(!CanRecord(big));
  CHECK(Line(big, "locked memory").fatal);
  f.privileges.cap_effective = (1ull << 38) | (1ull << 14);  // CAP_PERFMON + CAP_IPC_LOCK
  auto capable = EvaluateHost(f, {.kernel = true, .all_cpus = true, .aux_bytes = 4 << 20});
  CHECK(CanRecord(capable));
  CHECK(FormatCheckLine(Line(capable, "privileges")) ==
        "OK      privileges: uid 1000, CAP_PERFMON, CAP_IPC_LOCK (CapEff 0000004000004000)");
}

TEST_CASE("an AMD VM cannot record: the cpu and PMU lines say why and point at pt-emulate") {
  HostFacts f = AmdVm();
  auto lines = EvaluateHost(f, {});
  CHECK(!CanRecord(lines));
  CHECK(FormatCheckLine(Line(lines, "intel_pt PMU")) ==
        "MISSING intel_pt PMU: /sys/bus/event_source/devices/intel_pt does not exist -- fix: the "
        "kernel has no Intel PT PMU (needs PT hardware and CONFIG_CPU_SUP_INTEL; in a VM, PT "
        "passthrough); use pt-emulate here instead (software, ~50,000 instructions/s: tens of "
        "thousands of times slower)");
  CHECK(Line(lines, "cpu").fatal);
  CHECK(!Line(lines, "hypervisor").ok);
  CHECK(!Line(lines, "hypervisor").fatal);
  CHECK(FormatCheckLine(Line(lines, "hypervisor")) ==
        "WARN    hypervisor: running in a VM -- fix: VMs expose PT only with passthrough (KVM: -cpu "
        "host with intel-pt); most clouds do not");
  CHECK(!Line(lines, "container").ok);  // a WARN: docker may block perf_event_open
  CHECK(!Line(lines, "container").fatal);
  CHECK(*NoIntelPtMessage(f) ==
        "no Intel PT on this host: /sys/bus/event_source/devices/intel_pt does not exist (CPU: "
        "AuthenticAMD family 25 model 1, in a VM); use pt-emulate here instead (software, "
        "~50,000 instructions/s: tens of thousands of times slower), or pt-record --sideband-only");
  CHECK(!NoIntelPtMessage(IntelHost()));
}

TEST_CASE("--check never says OK in a line that warns: a container is a WARN") {
  HostFacts f = IntelHost();
  f.container_hints = {"/.dockerenv exists"};
  f.perf_event_mlock_kb.reset();
  auto lines = EvaluateHost(f, {});
  CHECK(CanRecord(lines));
  CHECK(FormatCheckLine(Line(lines, "container")) ==
        "WARN    container: /.dockerenv exists -- fix: perf_event_open may be blocked: docker "
        "needs --cap-add PERFMON or a seccomp profile allowing perf_event_open");
  for (const CheckLine& line : lines) {
    std::string text = FormatCheckLine(line);
    CAPTURE(text);
    if (text.rfind("OK ", 0) == 0) {
      CHECK(text.find(" -- fix:") == std::string::npos);
      CHECK(text.find("blocked") == std::string::npos);
      CHECK(text.find("shrunk") == std::string::npos);
    }
  }
}

TEST_CASE("kernel version gates build ids in MMAP2") {
  HostFacts f = IntelHost();
  f.kernel_release = "5.10.0-28-amd64";
  auto lines = EvaluateHost(f, {});
  CHECK(!Line(lines, "kernel").ok);
  CHECK(!Line(lines, "kernel").fatal);
  CHECK(KernelVersion("6.18.44-fc") == std::pair<int, int>(6, 18));
  CHECK(KernelVersion("garbage") == std::pair<int, int>(0, 0));
}

TEST_CASE("ReadPtPmu reads type, caps and max_nonturbo_ratio from a sysfs tree") {
  char dir_template[] = "/tmp/ptscope-pmu-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  std::string dir = dir_template;
  mkdir((dir + "/caps").c_str(), 0700);
  std::ofstream(dir + "/type") << "9\n";
  std::ofstream(dir + "/max_nonturbo_ratio") << "24\n";
  std::ofstream(dir + "/caps/psb_cyc") << "1\n";
  std::ofstream(dir + "/caps/mtc_periods") << "249\n";
  PtPmu pmu = ReadPtPmu(dir);
  CHECK(pmu.present);
  CHECK(pmu.type == 9);
  CHECK(pmu.max_nonturbo_ratio == 24u);
  CHECK(pmu.caps == std::map<std::string, std::string>{{"mtc_periods", "249"}, {"psb_cyc", "1"}});
  std::remove((dir + "/caps/psb_cyc").c_str());
  std::remove((dir + "/caps/mtc_periods").c_str());
  rmdir((dir + "/caps").c_str());
  std::remove((dir + "/type").c_str());
  std::remove((dir + "/max_nonturbo_ratio").c_str());
  rmdir(dir.c_str());
  PtPmu gone = ReadPtPmu(dir);
  CHECK(!gone.present);
  CHECK(gone.error == dir + " does not exist");
}

TEST_CASE("this host: cpuid and CapEff agree with /proc") {
  HostFacts f = GatherHostFacts();
  std::string cpuinfo;
  {
    std::ifstream in("/proc/cpuinfo");
    cpuinfo.assign(std::istreambuf_iterator<char>(in), {});
  }
  CHECK(cpuinfo.find("vendor_id\t: " + f.cpu.vendor + "\n") != std::string::npos);
  CHECK(cpuinfo.find("cpu family\t: " + std::to_string(f.cpu.family) + "\n") != std::string::npos);
  CHECK(cpuinfo.find("model\t\t: " + std::to_string(f.cpu.model) + "\n") != std::string::npos);
  CHECK(ParseCapEff("Name:\tx\nCapEff:\t000001fffeffffff\nCapBnd:\t0\n").value() ==
        0x1fffeffffffull);
  CHECK(!ParseCapEff("Name:\tx\n"));
}

TEST_CASE("defect 2: --check computes the locked-memory budget from both limits and sizes the "
          "rings into it") {
  HostFacts f = IntelHost();
  f.online_cpus = {0, 1};
  f.rlimit_memlock = 64 * 1024;
  auto lines = EvaluateHost(f, {.kernel = false, .all_cpus = false, .aux_bytes = 256 * 1024});
  CHECK(FormatCheckLine(Line(lines, "locked memory")) ==
        "OK      locked memory: this user may lock 516 KiB (perf_event_mlock_kb) × 2 CPUs + "
        "ulimit -l 64 KiB = 1096 KiB; a recording of 1 thread maps 844 KiB (AUX 256 KiB per "
        "event)");
  // 16 threads do not fit 256 KiB of AUX each: the default shrinks (sideband rings to 64 KiB,
  // the PT data rings to 16 KiB, then AUX areas to 32 KiB: 2 × 68 + 16 × (20 + 32) = 968 KiB)...
  auto many = EvaluateHost(f, {.kernel = false, .all_cpus = false, .aux_bytes = 256 * 1024,
                               .aux_is_default = true, .threads = 16});
  // (It records, with less trace than asked: a WARN, never an OK that warns.)
  CHECK(FormatCheckLine(Line(many, "locked memory")) ==
        "WARN    locked memory: this user may lock 516 KiB (perf_event_mlock_kb) × 2 CPUs + "
        "ulimit -l 64 KiB = 1096 KiB; a recording of 16 threads maps 968 KiB (AUX 32 KiB per "
        "event, shrunk to fit) -- fix: raise kernel.perf_event_mlock_kb or ulimit -l (or run "
        "with CAP_IPC_LOCK) for the whole AUX area");
  // ...but a size given with --snapshot-size does not, and the line says what to do.
  auto asked = EvaluateHost(f, {.kernel = false, .all_cpus = false, .aux_bytes = 256 * 1024,
                                .aux_is_default = false, .threads = 64});
  CHECK(FormatCheckLine(Line(asked, "locked memory")) ==
        "MISSING locked memory: this user may lock 516 KiB (perf_event_mlock_kb) × 2 CPUs + "
        "ulimit -l 64 KiB = 1096 KiB -- fix: the perf rings need 17192 KiB of locked memory (2 "
        "sideband rings of 20 KiB, 64 PT events of 12 KiB + 256 KiB AUX) but this user may lock "
        "516 KiB (perf_event_mlock_kb) × 2 CPUs + ulimit -l 64 KiB = 1096 KiB: use a smaller "
        "--snapshot-size, raise ulimit -l or kernel.perf_event_mlock_kb, or give pt-record "
        "CAP_IPC_LOCK");
}

}  // namespace ptscope::record
