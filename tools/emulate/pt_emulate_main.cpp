// pt-emulate: produce a .ptar with genuine Intel PT packets on hosts without PT, by single-stepping
// a real program with ptrace (issue #3).
//
//   pt-emulate [OPTIONS] -o OUT.ptar -- PROGRAM [ARGS...]
//   pt-emulate [OPTIONS] -o OUT.ptar -p PID[,PID...]
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "ptscope/tool_version.h"
#include "session.h"
#include "step_source.h"
#include "target.h"
#include "trigger_policy.h"

namespace po = boost::program_options;
using namespace ptscope;
using namespace ptscope::emulate;

namespace {

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

struct Parsed {
  record::SessionOptions session;
  EmulateOptions options;
  std::string ground_truth;
  double virtual_ghz = 1.0;
  bool help = false;
};

Result<Parsed> ParseArgs(int argc, char** argv) {
  Parsed parsed;
  record::SessionOptions& session = parsed.session;
  EmulateOptions& o = parsed.options;
  // Everything after the first "--" is the program and its arguments, untouched.
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      split = i;
      break;
    }
  }
  for (int i = split + 1; i < argc; ++i) session.argv.push_back(argv[i]);
  for (int i = 0; i < argc; ++i) session.command_line += (i ? " " : "") + std::string(argv[i]);
  session.tool_version = format::PtscopeVersion();

  std::string pids, snapshot_size = "4M", timing = "cyc", psb_period = "4K", trigger, start_at;
  std::string clock = "virtual";
  uint32_t mtc_period = 3;
  double duration = 0;
  po::options_description desc(
      "pt-emulate: record genuine Intel PT packets by single-stepping a program\n"
      "  pt-emulate [OPTIONS] -o OUT.ptar -- PROGRAM [ARGS...]\n"
      "  pt-emulate [OPTIONS] -o OUT.ptar -p PID[,PID...]\nOptions");
  desc.add_options()
      ("help,h", "show this help")
      ("version", "print the version and this binary's build id")
      ("output,o", po::value(&session.output), "archive to write (.ptar)")
      ("pid,p", po::value(&pids), "attach to running processes (comma-separated)")
      ("full", "record everything (default: snapshot mode, keep the last --snapshot-size)")
      ("snapshot-size", po::value(&snapshot_size), "per-thread snapshot ring (default 4M)")
      ("trigger", po::value(&trigger),
       "take the snapshot when any thread executes SYMBOL (any module), MODULE:SYMBOL or "
       "0xADDRESS")
      ("multi-snapshot", "snapshot every time the trigger fires (default: first time, then stop)")
      ("duration", po::value(&duration), "stop (and snapshot) after SECONDS")
      ("embed-binaries", "copy every mapped ELF into the archive")
      ("start-at", po::value(&start_at),
       "run untraced until SYMBOL (in any module, also one loaded later), MODULE:SYMBOL or "
       "0xADDRESS executes, then trace")
      ("max-instructions", po::value(&o.max_instructions), "stop after N traced instructions")
      ("timing", po::value(&timing), "none|tsc|mtc|cyc (default cyc)")
      ("mtc-period", po::value(&mtc_period), "MTC every 2^N crystal clock ticks (0-15, default 3)")
      ("psb-period", po::value(&psb_period), "bytes between PSB+ (default 4K)")
      ("no-retcomp", "never compress returns")
      ("virtual-ghz", po::value(&parsed.virtual_ghz),
       "virtual clock: 1 instruction = 1 cycle (default 1.0)")
      ("clock", po::value(&clock),
       "virtual: only instructions advance time, at --virtual-ghz (repeatable; default). real: "
       "also the real time each syscall took (blocking, sleeping, being descheduled), written "
       "as hardware does after a sleep state: TSC, TMA, CBR at the return to user code")
      ("follow-fork", "also trace child processes")
      ("cpus", po::value(&o.cpus), "per-CPU streams: schedule the threads on N virtual CPUs "
                                   "(as perf record -a writes them, with context-switch sideband)")
      ("timeslice", po::value(&o.timeslice),
       "with --cpus: instructions a thread runs before it is preempted (default 20000)")
      ("ground-truth", po::value(&parsed.ground_truth),
       "write 'TID 0xADDRESS' per traced instruction");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(split, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (const std::exception& e) {  // Boost reports bad options by exception
    return MakeError(Errc::kInvalidArgument, std::string(e.what()) + " (see --help)");
  }
  if (vm.count("version")) {
    std::printf("%s\n", format::VersionLine("pt-emulate").c_str());
    parsed.help = true;
    return parsed;
  }
  if (vm.count("help")) {
    std::ostringstream text;
    text << desc;
    std::fputs(text.str().c_str(), stdout);
    parsed.help = true;
    return parsed;
  }
  if (session.output.empty()) return MakeError(Errc::kInvalidArgument, "missing -o OUT.ptar");
  if (session.argv.empty() == pids.empty()) {
    return MakeError(Errc::kInvalidArgument,
                     "give either a program after '--' or -p PID (exactly one of them)");
  }
  if (!pids.empty()) {
    session.mode = record::SourceSettings::Mode::kAttach;
    std::stringstream pid_list(pids);
    for (std::string item; std::getline(pid_list, item, ',');) {
      char* end = nullptr;
      const long pid = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || pid <= 0)
        return MakeError(Errc::kInvalidArgument, "-p: '" + item + "' is not a process id");
      session.pids.push_back(static_cast<int>(pid));
    }
  }
  if (vm.count("full")) {
    o.snapshot_size = 0;
    session.snapshot = false;
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
  if (!(parsed.virtual_ghz >= 0.01 && parsed.virtual_ghz <= 100))
    return MakeError(Errc::kInvalidArgument, "--virtual-ghz: between 0.01 and 100");
  o.encoder.cbr = static_cast<uint8_t>(
      std::max(1.0, std::min(255.0, std::round(parsed.virtual_ghz * 10))));
  if (clock != "virtual" && clock != "real")
    return MakeError(Errc::kInvalidArgument, "--clock: '" + clock + "' is not virtual|real");
  o.real_clock = o.encoder.time_after_gap = clock == "real";
  if (o.real_clock && o.encoder.timing == TimingMode::kNone)
    return MakeError(Errc::kInvalidArgument, "--clock real needs timing packets (--timing tsc, mtc or cyc)");
  o.follow_fork = vm.count("follow-fork") > 0;
  if (vm.count("cpus") && (o.cpus < 1 || o.cpus > 1024))
    return MakeError(Errc::kInvalidArgument, "--cpus: between 1 and 1024 virtual CPUs");
  if (vm.count("timeslice") && !vm.count("cpus"))
    return MakeError(Errc::kInvalidArgument, "--timeslice needs --cpus N");
  if (o.timeslice < 1) return MakeError(Errc::kInvalidArgument, "--timeslice: at least 1 instruction");
  if (o.cpus > 0 && o.real_clock) {
    return MakeError(Errc::kInvalidArgument,
                     "--clock real works with per-thread streams only (not with --cpus)");
  }
  if (o.cpus > 0 && o.encoder.timing == TimingMode::kNone) {
    return MakeError(Errc::kInvalidArgument,
                     "--cpus needs timing packets (per-CPU streams are split into threads by time): "
                     "use --timing cyc (exact), mtc (exact under pt-emulate) or tsc (PSBs only)");
  }
  if (vm.count("trigger")) {
    PTSCOPE_ASSIGN_OR_RETURN(session.trigger, record::ParseTriggerSpec(trigger));
  }
  if (vm.count("start-at")) {
    PTSCOPE_ASSIGN_OR_RETURN(o.start_at, record::ParseTriggerSpec(start_at, "--start-at"));
  }
  session.multi_snapshot = vm.count("multi-snapshot") > 0;
  o.multi_snapshot = session.multi_snapshot;
  if (session.multi_snapshot && !session.trigger)
    return MakeError(Errc::kInvalidArgument, "--multi-snapshot needs --trigger");
  if (vm.count("duration")) {
    if (!(duration > 0)) return MakeError(Errc::kInvalidArgument, "--duration must be > 0 seconds");
    session.duration_s = duration;
  }
  session.embed_binaries = vm.count("embed-binaries") > 0;
  return parsed;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = ParseArgs(argc, argv);
  if (!parsed) {
    std::fprintf(stderr, "pt-emulate: %s\n", parsed.error().message.c_str());
    return 2;
  }
  if (parsed->help) return 0;
  StepSource source(parsed->options, parsed->ground_truth, parsed->virtual_ghz);
  auto result = record::RunSession(parsed->session, source);
  if (!result) {
    // The archive (if it was created) keeps every chunk written before the error.
    std::fprintf(stderr, "pt-emulate: %s\n", result.error().message.c_str());
    return 1;
  }
  for (const std::string& w : result->warnings) std::fprintf(stderr, "pt-emulate: warning: %s\n", w.c_str());
  const TraceSummary& summary = source.summary();
  const double rate = summary.seconds > 0 ? summary.instructions / summary.seconds : 0;
  std::fprintf(stderr,
               "pt-emulate: %llu instructions traced, %llu threads, %llu bytes of PT, "
               "%.0f instructions/s (%.2f s, stopped by %s)%s\n",
               static_cast<unsigned long long>(summary.instructions),
               static_cast<unsigned long long>(summary.threads),
               static_cast<unsigned long long>(summary.pt_bytes), rate, summary.seconds,
               result->reason.c_str(),
               summary.unexpected_flow ? " [unexpected control flow encoded as async]" : "");
  return 0;
}
