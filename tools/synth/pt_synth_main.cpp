// pt-synth: large, valid Intel PT captures from random walks over a real binary's code, for
// benchmarks (scripts/bench) and property tests (tests/e2e/synth). See synth_capture.h and walker.h.
#include <boost/program_options.hpp>

#include <cstdio>
#include <sstream>
#include <string>

#include "synth_capture.h"

namespace po = boost::program_options;
using ptscope::Errc;
using ptscope::Result;
using ptscope::Unexpected;
using ptscope::synth::SynthOptions;
using ptscope::ptgen::Timing;

namespace {

struct Parsed {
  SynthOptions options;
  bool help = false;
};

Result<Timing> ParseTiming(const std::string& text) {
  if (text == "cyc") return Timing::kCyc;
  if (text == "mtc") return Timing::kMtc;
  if (text == "tsc") return Timing::kTsc;
  if (text == "none") return Timing::kNone;
  return Unexpected(Errc::kInvalidArgument, "--timing " + text + ": use cyc, mtc, tsc or none");
}

Result<Parsed> ParseArgs(int argc, char** argv) {
  Parsed parsed;
  SynthOptions& o = parsed.options;
  std::string timing = "cyc";
  po::options_description desc(
      "usage: pt-synth -o OUT.ptar --binary ELF --instructions N [options]\n"
      "Writes a capture of random walks over ELF's code, as pt-emulate would have traced them");
  desc.add_options()
      ("help,h", "show this help")
      ("output,o", po::value(&o.output), "the archive to write")
      ("binary", po::value(&o.binary), "an x86-64 ELF executable whose code is walked")
      ("instructions", po::value(&o.instructions), "instructions to generate (all threads)")
      ("seed", po::value(&o.seed)->default_value(1), "random seed: same seed, same capture")
      ("threads", po::value(&o.threads)->default_value(1),
       "threads (one PT stream each, unless --cpus)")
      ("cpus", po::value(&o.cpus),
       "per-CPU streams: the threads scheduled on N virtual CPUs, with context-switch sideband "
       "(as perf record -a writes them)")
      ("timeslice", po::value(&o.timeslice)->default_value(20000),
       "with --cpus: a thread leaves its CPU at its first syscall, library call or restart after "
       "this many instructions there")
      ("psb-period", po::value(&o.encoder.psb_period)->default_value(4096), "bytes between PSB+")
      ("timing", po::value(&timing)->default_value("cyc"), "cyc | mtc | tsc | none")
      ("no-retcomp", "never compress returns (TIP for every ret)")
      ("piece-size", po::value(&o.piece_size)->default_value(1u << 20), "bytes per PT piece")
      ("ground-truth", po::value(&o.ground_truth), "write `TID 0xADDRESS` per instruction here")
      ("untraced-exits", po::value(&o.untraced_exits),
       "write `TID N 0xTARGET` per TIP.PGD here (N: instructions so far; 0x0: suppressed)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return Unexpected(Errc::kInvalidArgument, std::string(e.what()) + " (see --help)");
  }
  if (vm.count("help")) {
    std::printf("%s", (std::ostringstream() << desc).str().c_str());
    parsed.help = true;
    return parsed;
  }
  if (o.output.empty() || o.binary.empty() || o.instructions == 0) {
    return Unexpected(Errc::kInvalidArgument, "-o, --binary and --instructions (> 0) are required");
  }
  if (o.threads == 0 || o.threads > 4096) {
    return Unexpected(Errc::kInvalidArgument, "--threads must be between 1 and 4096");
  }
  if (vm.count("cpus") && (o.cpus < 1 || o.cpus > 1024)) {
    return Unexpected(Errc::kInvalidArgument, "--cpus must be between 1 and 1024");
  }
  if (!vm["timeslice"].defaulted() && o.cpus == 0) {
    return Unexpected(Errc::kInvalidArgument, "--timeslice needs --cpus N");
  }
  if (o.timeslice == 0) return Unexpected(Errc::kInvalidArgument, "--timeslice must be > 0");
  if (o.encoder.psb_period < 256) {
    return Unexpected(Errc::kInvalidArgument, "--psb-period must be at least 256 bytes");
  }
  if (o.piece_size == 0) return Unexpected(Errc::kInvalidArgument, "--piece-size must be > 0");
  PTSCOPE_ASSIGN_OR_RETURN(o.encoder.timing, ParseTiming(timing));
  if (o.cpus > 0 && o.encoder.timing != Timing::kCyc && o.encoder.timing != Timing::kMtc) {
    // As pt-emulate --cpus: a decoder splits a CPU's stream into threads by time.
    return Unexpected(Errc::kInvalidArgument,
                      "--cpus needs --timing cyc or mtc (per-CPU streams are split into threads "
                      "at the switch records' times)");
  }
  o.encoder.return_compression = vm.count("no-retcomp") == 0;
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);
  return parsed;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = ParseArgs(argc, argv);
  if (!parsed) {
    std::fprintf(stderr, "pt-synth: %s\n", parsed.error().message.c_str());
    return 2;
  }
  if (parsed->help) return 0;
  auto summary = ptscope::synth::WriteSynthCapture(parsed->options);
  if (!summary) {
    // An archive already begun keeps what was written, readable and without its End chunk (so
    // it does not pass for a complete capture); one that could not even be begun is not left.
    std::fprintf(stderr, "pt-synth: %s\n", summary.error().message.c_str());
    return 1;
  }
  const auto& s = *summary;
  std::fprintf(stderr,
               "pt-synth: %llu instructions, %llu bytes of PT (%llu PSBs), %llu calls, %llu returns "
               "(%llu compressed), max depth %llu, %llu library calls, %llu syscalls, %llu restarts, %llu blocks; %.2f s, %.1f M "
               "instructions/s\n",
               static_cast<unsigned long long>(s.instructions),
               static_cast<unsigned long long>(s.pt_bytes), static_cast<unsigned long long>(s.psbs),
               static_cast<unsigned long long>(s.calls), static_cast<unsigned long long>(s.returns),
               static_cast<unsigned long long>(s.compressed_returns),
               static_cast<unsigned long long>(s.max_depth),
               static_cast<unsigned long long>(s.library_calls),
               static_cast<unsigned long long>(s.syscalls),
               static_cast<unsigned long long>(s.restarts),
               static_cast<unsigned long long>(s.blocks_decoded), s.seconds,
               s.seconds > 0 ? s.instructions / s.seconds / 1e6 : 0.0);
  if (parsed->options.cpus > 0) {
    std::fprintf(stderr, "pt-synth: %u threads on %u CPUs, %llu switch-ins\n",
                 parsed->options.threads, parsed->options.cpus,
                 static_cast<unsigned long long>(s.switch_ins));
  }
  return 0;
}
