// pt-emulate: produce a .ptar with genuine Intel PT packets on hosts without PT, by single-stepping
// a real program with ptrace (issue #3).
//
//   pt-emulate [OPTIONS] -o OUT.ptar -- PROGRAM [ARGS...]
//   pt-emulate [OPTIONS] -o OUT.ptar -p PID[,PID...]
#include <sys/utsname.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <sstream>

#include "capture_writer.h"
#include "host_info.h"
#include "tracer.h"

namespace po = boost::program_options;
using namespace ptscope;
using namespace ptscope::emulate;

namespace {

constexpr const char* kVersion = "0.1.0";

void OnStopSignal(int) { g_stop_requested = 1; }
void OnSnapshotSignal(int) { g_snapshot_requested = 1; }

void InstallSignalHandlers() {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;  // no SA_RESTART: waitpid returns EINTR
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  action.sa_handler = OnSnapshotSignal;
  sigaction(SIGUSR2, &action, nullptr);
}

Result<uint64_t> ParseSize(const std::string& text, const std::string& option) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  uint64_t scale = 1;
  const std::string suffix = end ? std::string(end) : "";
  if (suffix == "K" || suffix == "k" || suffix == "KiB") scale = 1ull << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") scale = 1ull << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB") scale = 1ull << 30;
  if (end == text.c_str() || !(value > 0) || !(suffix.empty() || scale != 1)) {
    return MakeError(Errc::kInvalidArgument, "--" + option + ": '" + text +
                                                 "' is not a size (examples: 4096, 512K, 4M, 1G)");
  }
  return static_cast<uint64_t>(value * static_cast<double>(scale));
}

uint64_t NowRealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000 + static_cast<uint64_t>(ts.tv_nsec);
}

struct Parsed {
  EmulateOptions options;
  std::string command_line;
  bool help = false;
};

Result<Parsed> ParseArgs(int argc, char** argv) {
  Parsed parsed;
  EmulateOptions& o = parsed.options;
  // Everything after the first "--" is the program and its arguments, untouched.
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      split = i;
      break;
    }
  }
  for (int i = split + 1; i < argc; ++i) o.command.push_back(argv[i]);
  for (int i = 0; i < argc; ++i) parsed.command_line += (i ? " " : "") + std::string(argv[i]);

  std::string pids, snapshot_size = "4M", timing = "cyc", psb_period = "4K";
  uint32_t mtc_period = 3;
  po::options_description desc(
      "pt-emulate: record genuine Intel PT packets by single-stepping a program\n"
      "  pt-emulate [OPTIONS] -o OUT.ptar -- PROGRAM [ARGS...]\n"
      "  pt-emulate [OPTIONS] -o OUT.ptar -p PID[,PID...]\nOptions");
  desc.add_options()
      ("help,h", "show this help")
      ("output,o", po::value(&o.output), "archive to write (.ptar)")
      ("pid,p", po::value(&pids), "attach to running processes (comma-separated)")
      ("full", "record everything (default: snapshot mode, keep the last --snapshot-size)")
      ("snapshot-size", po::value(&snapshot_size), "per-thread snapshot ring (default 4M)")
      ("trigger", po::value(&o.trigger), "take the snapshot when any thread executes SYMBOL")
      ("multi-snapshot", "snapshot every time the trigger fires (default: first time, then stop)")
      ("start-at", po::value(&o.start_at), "run untraced until SYMBOL, then trace")
      ("max-instructions", po::value(&o.max_instructions), "stop after N traced instructions")
      ("timing", po::value(&timing), "none|tsc|mtc|cyc (default cyc)")
      ("mtc-period", po::value(&mtc_period), "MTC every 2^N crystal clock ticks (0-15, default 3)")
      ("psb-period", po::value(&psb_period), "bytes between PSB+ (default 4K)")
      ("no-retcomp", "never compress returns")
      ("virtual-ghz", po::value(&o.virtual_ghz), "virtual clock: 1 instruction = 1 cycle (default 1.0)")
      ("follow-fork", "also trace child processes")
      ("cpus", po::value(&o.cpus), "per-CPU streams: schedule the threads on N virtual CPUs "
                                   "(as perf record -a writes them, with context-switch sideband)")
      ("timeslice", po::value(&o.timeslice),
       "with --cpus: instructions a thread runs before it is preempted (default 20000)")
      ("ground-truth", po::value(&o.ground_truth), "write 'TID 0xADDRESS' per traced instruction");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(split, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (const std::exception& e) {  // Boost reports bad options by exception
    return MakeError(Errc::kInvalidArgument, std::string(e.what()) + " (see --help)");
  }
  if (vm.count("help")) {
    std::ostringstream text;
    text << desc;
    std::fputs(text.str().c_str(), stdout);
    parsed.help = true;
    return parsed;
  }
  if (o.output.empty()) return MakeError(Errc::kInvalidArgument, "missing -o OUT.ptar");
  if (o.command.empty() == pids.empty()) {
    return MakeError(Errc::kInvalidArgument,
                     "give either a program after '--' or -p PID (exactly one of them)");
  }
  std::stringstream pid_list(pids);
  for (std::string item; std::getline(pid_list, item, ',');) {
    char* end = nullptr;
    const long pid = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || pid <= 0)
      return MakeError(Errc::kInvalidArgument, "-p: '" + item + "' is not a process id");
    o.pids.push_back(static_cast<pid_t>(pid));
  }
  if (vm.count("full")) {
    o.snapshot_size = 0;
  } else {
    PTSCOPE_ASSIGN_OR_RETURN(o.snapshot_size, ParseSize(snapshot_size, "snapshot-size"));
  }
  PTSCOPE_ASSIGN_OR_RETURN(o.encoder.psb_period, ParseSize(psb_period, "psb-period"));
  if (o.encoder.psb_period < 64)
    return MakeError(Errc::kInvalidArgument, "--psb-period: at least 64 bytes");
  if (timing == "none") o.encoder.timing = TimingMode::kNone;
  else if (timing == "tsc") o.encoder.timing = TimingMode::kTsc;
  else if (timing == "mtc") o.encoder.timing = TimingMode::kMtc;
  else if (timing == "cyc") o.encoder.timing = TimingMode::kCyc;
  else return MakeError(Errc::kInvalidArgument, "--timing: '" + timing + "' is not none|tsc|mtc|cyc");
  if (mtc_period > 15) return MakeError(Errc::kInvalidArgument, "--mtc-period: 0 to 15");
  o.encoder.mtc_freq = mtc_period;
  o.encoder.return_compression = !vm.count("no-retcomp");
  if (!(o.virtual_ghz >= 0.01 && o.virtual_ghz <= 100))
    return MakeError(Errc::kInvalidArgument, "--virtual-ghz: between 0.01 and 100");
  o.encoder.cbr = static_cast<uint8_t>(std::max(1.0, std::min(255.0, std::round(o.virtual_ghz * 10))));
  o.follow_fork = vm.count("follow-fork") > 0;
  if (vm.count("cpus") && (o.cpus < 1 || o.cpus > 1024))
    return MakeError(Errc::kInvalidArgument, "--cpus: between 1 and 1024 virtual CPUs");
  if (vm.count("timeslice") && !vm.count("cpus"))
    return MakeError(Errc::kInvalidArgument, "--timeslice needs --cpus N");
  if (o.timeslice < 1) return MakeError(Errc::kInvalidArgument, "--timeslice: at least 1 instruction");
  if (o.cpus > 0 && o.encoder.timing == TimingMode::kNone) {
    return MakeError(Errc::kInvalidArgument,
                     "--cpus needs timing packets (per-CPU streams are split into threads by time): "
                     "use --timing cyc (exact), mtc (exact under pt-emulate) or tsc (PSBs only)");
  }
  o.multi_snapshot = vm.count("multi-snapshot") > 0;
  return parsed;
}

std::string Hex(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::vector<std::pair<std::string, std::string>> StartMetadata(const Parsed& parsed,
                                                               const TimeConversion& time) {
  const EmulateOptions& o = parsed.options;
  const EncoderConfig& e = o.encoder;
  const bool tsc = e.timing != TimingMode::kNone, mtc = e.timing >= TimingMode::kMtc,
             cyc = e.timing == TimingMode::kCyc;
  uint64_t psb_code = 0;
  while (psb_code < 15 && (uint64_t{1} << (psb_code + 12)) <= e.psb_period) ++psb_code;
  const uint64_t config = 1 | (uint64_t{1} << 13) | (tsc ? 1u << 10 : 0) | (mtc ? 1u << 9 : 0) |
                          (cyc ? 1u << 1 : 0) | (e.return_compression ? 0 : 1u << 11) |
                          (mtc ? uint64_t{e.mtc_freq} << 14 : 0) | (psb_code << 24);
  utsname uts{};
  uname(&uts);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const record::CpuIdentity cpu = record::ReadCpuIdentity();
  auto u = [](uint64_t v) { return std::to_string(v); };
  char ghz[32];
  std::snprintf(ghz, sizeof(ghz), "%g", o.virtual_ghz);
  std::vector<std::pair<std::string, std::string>> entries = {
      {"tool", "pt-emulate"}, {"tool.version", kVersion}, {"host.name", host},
      {"kernel.release", uts.release}, {"command", parsed.command_line},
      {"capture.emulated", "1"}, {"capture.mode", o.snapshot_size ? "snapshot" : "full"},
      {"capture.start_realtime_ns", u(NowRealtimeNs())},
      {"cpu.vendor", cpu.vendor}, {"cpu.family", u(cpu.family)}, {"cpu.model", u(cpu.model)},
      {"cpu.stepping", u(cpu.stepping)},
      {"pt.config", Hex(config)}, {"pt.tsc", u(tsc)}, {"pt.mtc", u(mtc)},
      {"pt.mtc_period", u(e.mtc_freq)}, {"pt.cyc", u(cyc)}, {"pt.cyc_thresh", "0"},
      {"pt.psb_period", u(e.psb_period)}, {"pt.noretcomp", u(!e.return_compression)},
      {"pt.branch", "1"}, {"pt.user", "1"}, {"pt.kernel", "0"}, {"pt.filters", ""},
      {"pt.max_nonturbo_ratio", u(e.cbr)}, {"pt.cpuid15_eax", "1"},
      {"pt.cpuid15_ebx", u(e.tsc_per_ctc)},
      {"time.shift", u(time.shift)}, {"time.mult", u(time.mult)}, {"time.zero", u(time.zero)},
      {"time.cap_user_time_zero", "1"}, {"emulate.virtual_ghz", ghz},
  };
  if (o.cpus > 0) {  // per-CPU captures only: per-thread archives stay as they were
    entries.push_back({"emulate.cpus", u(o.cpus)});
    entries.push_back({"emulate.timeslice", u(o.timeslice)});
  }
  return entries;
}

Status Emulate(const Parsed& parsed, TraceSummary* summary) {
  const EmulateOptions& o = parsed.options;
  TimeConversion time;
  time.mult = static_cast<uint32_t>(std::llround(static_cast<double>(1u << time.shift) / o.virtual_ghz));
  format::WriterOptions writer_options;
  writer_options.features = format::kFeatureEmulated |
                            (o.snapshot_size ? uint64_t{format::kFeatureSnapshot} : 0) |
                            (o.cpus > 0 ? uint64_t{format::kFeaturePerCpu} : 0);
  PTSCOPE_ASSIGN_OR_RETURN(auto writer, record::CaptureWriter::Create(o.output, writer_options));
  std::unique_ptr<GroundTruthWriter> truth;
  if (!o.ground_truth.empty()) {
    PTSCOPE_ASSIGN_OR_RETURN(truth, GroundTruthWriter::Create(o.ground_truth));
  }
  PTSCOPE_TRY(writer->WriteMetadata(StartMetadata(parsed, time)));
  Tracer tracer(o, writer.get(), truth.get(), time);
  if (!o.command.empty()) {
    PTSCOPE_TRY(tracer.Launch());
  } else {
    PTSCOPE_TRY(tracer.Attach());
  }
  PTSCOPE_TRY(tracer.Run());
  *summary = tracer.summary();
  summary->pt_bytes = tracer.summary().pt_bytes;
  PTSCOPE_TRY(writer->WriteMetadata({{"trigger.reason", summary->stop_reason},
                                     {"capture.stop_realtime_ns", std::to_string(NowRealtimeNs())}}));
  if (truth) PTSCOPE_TRY(truth->Close());
  return writer->Close();
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = ParseArgs(argc, argv);
  if (!parsed) {
    std::fprintf(stderr, "pt-emulate: %s\n", parsed.error().message.c_str());
    return 2;
  }
  if (parsed->help) return 0;
  InstallSignalHandlers();
  TraceSummary summary;
  const Status status = Emulate(*parsed, &summary);
  if (!status) {
    std::fprintf(stderr, "pt-emulate: %s\n", status.error().message.c_str());
    unlink(parsed->options.output.c_str());  // never leave a capture that looks usable
    return 1;
  }
  const double rate = summary.seconds > 0 ? summary.instructions / summary.seconds : 0;
  std::fprintf(stderr,
               "pt-emulate: %llu instructions traced, %llu threads, %llu bytes of PT, "
               "%.0f instructions/s (%.2f s, stopped by %s)%s\n",
               static_cast<unsigned long long>(summary.instructions),
               static_cast<unsigned long long>(summary.threads),
               static_cast<unsigned long long>(summary.pt_bytes), rate, summary.seconds,
               summary.stop_reason.c_str(),
               summary.unexpected_flow ? " [unexpected control flow encoded as async]" : "");
  return 0;
}
