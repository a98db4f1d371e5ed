// pt-record: capture Intel PT plus sideband into a .ptar archive (issue #5). Only this file
// prints or exits; everything else returns Results.
#include <boost/program_options.hpp>

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "host_info.h"
#include "ptscope/tool_version.h"
#include "kernel_source.h"
#include "selftest.h"
#include "session.h"
#include "target.h"

namespace po = boost::program_options;
using namespace ptscope;
using namespace ptscope::record;

namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitNoPt = 2;

constexpr const char* kUsage =
    "usage: pt-record --check [--kernel] [-a]\n"
    "       pt-record --selftest [-o REPORT.ptar]\n"
    "       pt-record [OPTIONS] -o OUT.ptar -- PROGRAM [ARGS...]\n"
    "       pt-record [OPTIONS] -o OUT.ptar -p PID[,PID...]\n"
    "       pt-record [OPTIONS] -o OUT.ptar -a\n";

po::options_description Describe() {
  po::options_description d("options");
  d.add_options()
      ("help,h", "this help")
      ("version", "print the version and this binary's build id")
      ("check", "report whether this host can record Intel PT, and what to fix")
      ("selftest", "record a known program and check its trace (first run on a new host)")
      ("output,o", po::value<std::string>(), "archive to write (mode 0600)")
      ("pid,p", po::value<std::string>(), "attach to running processes (all their threads)")
      ("all-cpus,a", "trace every CPU")
      ("full", "record everything (no ring buffer); default is a snapshot ring")
      ("snapshot-size", po::value<std::string>(), "AUX buffer per traced thread/CPU (e.g. 4M)")
      ("trigger", po::value<std::string>(),
       "snapshot when SYMBOL (any module), MODULE:SYMBOL or 0xADDR executes")
      ("multi-snapshot", "with --trigger: snapshot at every hit and keep going")
      ("psb-period", po::value<uint32_t>(), "PSB every 2^(N+11) bytes")
      ("mtc-period", po::value<uint32_t>(), "MTC every CTC/2^N")
      ("cyc-thresh", po::value<uint32_t>(), "CYC after 2^(N-1) cycles")
      ("no-retcomp", "disable return compression")
      ("timing", po::value<std::string>()->default_value("normal"), "low | normal | high")
      ("kernel", "trace the kernel too")
      ("filter", po::value<std::string>(), "'filter FUNC @ /path/file' (Intel PT IP filter)")
      ("duration", po::value<double>(), "stop after SECONDS")
      ("embed-binaries", "copy every mapped ELF into the archive")
      ("sideband-only", "record only sideband (works without Intel PT)");
  return d;
}

int RunCheck(const HostFacts& facts, const po::variables_map& vm) {
  RecordingNeeds needs;
  needs.kernel = vm.count("kernel") > 0;
  needs.all_cpus = vm.count("all-cpus") > 0;
  needs.aux_bytes = DefaultAuxBytes(facts);
  if (vm.count("snapshot-size")) {
    auto size = ParseBufferSize(vm["snapshot-size"].as<std::string>());
    if (!size) {
      std::fprintf(stderr, "pt-record: %s\n", size.error().message.c_str());
      return kExitError;
    }
    needs.aux_bytes = *size;
    needs.aux_is_default = false;
  }
  std::vector<CheckLine> lines = EvaluateHost(facts, needs);
  for (const CheckLine& line : lines) std::printf("%s\n", FormatCheckLine(line).c_str());
  bool ok = CanRecord(lines);
  std::printf("%s\n", ok ? "pt-record can record Intel PT on this host"
                         : "pt-record cannot record Intel PT on this host (see MISSING above)");
  return ok ? kExitOk : kExitNoPt;
}

// --selftest: pt-record re-executes itself into the workload, records it and checks the PT.
int RunSelftestCommand(const HostFacts& facts, const po::variables_map& vm) {
  if (auto missing = NoIntelPtMessage(facts)) {
    std::fprintf(stderr, "pt-record: selftest cannot run: %s\n", missing->c_str());
    return kExitNoPt;
  }
  char self[4096];
  ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) {
    std::fprintf(stderr, "pt-record: selftest: cannot read /proc/self/exe\n");
    return kExitError;
  }
  SelftestOptions options;
  options.workload_file.assign(self, static_cast<size_t>(length));
  options.workload_argv = {options.workload_file, kSelftestWorkloadArg};
  options.output = vm.count("output") ? vm["output"].as<std::string>() : "pt-record-selftest.ptar";
  options.tool_version = format::PtscopeVersion();
  auto note = [](const std::string& line) {
    std::fprintf(stderr, "pt-record: %s\n", line.c_str());
  };
  auto verdict = RunSelftest(SystemPerfKernel(), facts, options, note);
  if (!verdict) {
    std::fprintf(stderr, "pt-record: selftest could not record: %s\n",
                 verdict.error().message.c_str());
    return verdict.error().code == Errc::kUnsupported ? kExitNoPt : kExitError;
  }
  if (verdict->pass) {
    std::printf("pt-record selftest: PASS: %s (archive: %s)\n", verdict->detail.c_str(),
                options.output.c_str());
    return kExitOk;
  }
  std::printf("pt-record selftest: FAIL: %s; please attach %s to a bug report\n",
              verdict->detail.c_str(), options.output.c_str());
  return kExitError;
}

struct Options {
  SessionOptions session;
  KernelSourceOptions source;
};

Result<Options> BuildOptions(const po::variables_map& vm, std::vector<std::string> program,
                             const std::string& command_line, const HostFacts& facts) {
  Options options;
  SessionOptions& o = options.session;
  KernelSourceOptions& k = options.source;
  o.command_line = command_line;
  o.tool_version = format::PtscopeVersion();
  o.drop_privileges = true;
  int modes = (program.empty() ? 0 : 1) + (vm.count("pid") ? 1 : 0) + (vm.count("all-cpus") ? 1 : 0);
  if (modes != 1)
    return MakeError(Errc::kInvalidArgument,
                     "give exactly one of: -- PROGRAM [ARGS...], -p PID[,PID...], -a");
  if (!vm.count("output")) return MakeError(Errc::kInvalidArgument, "-o OUT.ptar is required");
  o.output = vm["output"].as<std::string>();
  if (!program.empty()) {
    o.mode = SourceSettings::Mode::kRun;
    o.argv = std::move(program);
  } else if (vm.count("pid")) {
    o.mode = SourceSettings::Mode::kAttach;
    PTSCOPE_ASSIGN_OR_RETURN(o.pids, ParsePidList(vm["pid"].as<std::string>()));
  } else {
    o.mode = SourceSettings::Mode::kAllCpus;
  }
  k.sideband_only = vm.count("sideband-only") > 0;
  o.snapshot = vm.count("full") == 0 && !k.sideband_only;
  o.embed_binaries = vm.count("embed-binaries") > 0;
  o.multi_snapshot = vm.count("multi-snapshot") > 0;
  if (vm.count("snapshot-size")) {
    PTSCOPE_ASSIGN_OR_RETURN(k.aux_bytes, ParseBufferSize(vm["snapshot-size"].as<std::string>()));
  }
  PTSCOPE_ASSIGN_OR_RETURN(k.pt.timing, ParseTiming(vm["timing"].as<std::string>()));
  if (vm.count("psb-period")) k.pt.psb_period = vm["psb-period"].as<uint32_t>();
  if (vm.count("mtc-period")) k.pt.mtc_period = vm["mtc-period"].as<uint32_t>();
  if (vm.count("cyc-thresh")) k.pt.cyc_thresh = vm["cyc-thresh"].as<uint32_t>();
  k.pt.no_retcomp = vm.count("no-retcomp") > 0;
  k.pt.kernel = vm.count("kernel") > 0;
  if (vm.count("filter")) {
    // Refused now, with the reason, rather than by the kernel once the program was started.
    PTSCOPE_ASSIGN_OR_RETURN(k.filter, ResolvePtFilter(vm["filter"].as<std::string>(),
                                                       FilterLimitsOf(facts, vm.count("all-cpus") > 0)));
  }
  if (vm.count("trigger")) {
    PTSCOPE_ASSIGN_OR_RETURN(TriggerSpec spec, ParseTriggerSpec(vm["trigger"].as<std::string>()));
    o.trigger = spec;
  }
  if (o.multi_snapshot && !o.trigger)
    return MakeError(Errc::kInvalidArgument, "--multi-snapshot needs --trigger");
  if (vm.count("duration")) {
    double d = vm["duration"].as<double>();
    if (!(d > 0)) return MakeError(Errc::kInvalidArgument, "--duration must be > 0 seconds");
    o.duration_s = d;
  }
  if (o.mode == SourceSettings::Mode::kAllCpus && o.trigger)
    return MakeError(Errc::kInvalidArgument, "--trigger needs a program or -p, not -a");
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == kSelftestWorkloadArg) RunSelftestWorkload();
  std::vector<std::string> ours, program;
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
  int i = 1;
  for (; i < argc && std::string(argv[i]) != "--"; ++i) ours.push_back(argv[i]);
  for (++i; i < argc; ++i) program.push_back(argv[i]);

  po::options_description desc = Describe();
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(ours).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {  // Boost reports bad options by exception; stop them here
    std::fprintf(stderr, "pt-record: %s\n%s", e.what(), kUsage);
    return kExitError;
  }
  if (vm.count("help")) {
    std::cout << kUsage << desc;
    return kExitOk;
  }
  if (vm.count("version")) {
    std::printf("%s\n", format::VersionLine("pt-record").c_str());
    return kExitOk;
  }
  HostFacts facts = GatherHostFacts();
  if (vm.count("check")) return RunCheck(facts, vm);
  if (vm.count("selftest")) {
    if (!program.empty() || vm.count("pid") || vm.count("all-cpus")) {
      std::fprintf(stderr, "pt-record: --selftest records its own program\n%s", kUsage);
      return kExitError;
    }
    return RunSelftestCommand(facts, vm);
  }

  auto options = BuildOptions(vm, std::move(program), command_line, facts);
  if (!options) {
    std::fprintf(stderr, "pt-record: %s\n%s", options.error().message.c_str(), kUsage);
    return kExitError;
  }
  auto note = [](const std::string& line) { std::fprintf(stderr, "pt-record: %s\n", line.c_str()); };
  if (!options->source.sideband_only) {
    if (auto missing = NoIntelPtMessage(facts)) {
      std::fprintf(stderr, "pt-record: %s\n", missing->c_str());
      return kExitNoPt;
    }
  }
  KernelPtSource source(SystemPerfKernel(), facts, options->source, note);
  auto summary = RunSession(options->session, source);
  if (!summary) {
    std::fprintf(stderr, "pt-record: %s\n", summary.error().message.c_str());
    return summary.error().code == Errc::kUnsupported ? kExitNoPt : kExitError;
  }
  for (const std::string& w : summary->warnings) note("warning: " + w);
  std::fprintf(stderr,
               "pt-record: wrote %s (%llu bytes): %u modules, %llu sideband bytes, %llu PT bytes, "
               "%u snapshots; stopped by %s\n",
               options->session.output.c_str(),
               static_cast<unsigned long long>(summary->archive_bytes), summary->modules,
               static_cast<unsigned long long>(summary->sideband_bytes),
               static_cast<unsigned long long>(summary->pt_bytes), summary->snapshots,
               summary->reason.c_str());
  return kExitOk;
}
