// pt-decode: .ptar (or perf.data) -> Perfetto trace / text / folded stacks / instruction list.
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cli_options.h"
#include "ptscope/decode.h"
#include "ptscope/capture.h"
#include "ptscope/format.h"
#include "ptscope/output_file.h"
#include "ptscope/symbols.h"
#include "ptscope/tool_version.h"

namespace po = boost::program_options;
using ptscope::decode::OutputFormat;

namespace {

constexpr const char* kUsage = "Usage: pt-decode [OPTIONS] INPUT...\n"
                               "Decode a ptscope capture (.ptar) or an Intel PT perf.data into a "
                               "trace of every function call.\n";
constexpr const char* kExitStatusHelp =
    "\nExit status (with several inputs: the worst, and a line per input at the end):\n"
    "  0  complete: every input decoded whole\n"
    "  3  output written, but partial: the input was damaged or cut off, executed code was not\n"
    "     found, or the trace could not be followed somewhere (the summary says what, and what\n"
    "     to do)\n"
    "  1  failed: nothing was decoded, or an error (the message names the file)\n"
    "  2  usage error\n"
    "\nEnvironment:\n"
    "  PTSCOPE_DEBUG_CACHE  where decompressed debug sections, sorted symbol and FDE tables\n"
    "     and the names, lines and inlined frames read from DWARF are kept between runs\n"
    "     (compressed debug files, e.g. Debian's libc, then decode without inflating them again,\n"
    "     large modules without re-sorting their tables, code decoded before without reading its\n"
    "     DWARF again); default\n"
    "     $XDG_CACHE_HOME/ptscope/debug-sections, else ~/.cache/ptscope/debug-sections; \"off\"\n"
    "     for none. Private (0700, files 0600); a directory others may write to is not used.\n"
    "     Files are checked against the bytes they came from; delete the directory to reclaim it\n"
    "  DEBUGINFOD_URLS  default for --debuginfod\n";

struct Options {
  std::vector<std::string> inputs;
  std::string output, output_dir, format, summary_json;
  std::vector<std::string> symbol_dirs;
  std::vector<std::string> debuginfod_urls;
  std::string jobs_text, unit_bytes_text;
  unsigned jobs = 0;  // 0: every core (at most kMaxJobs)
  size_t unit_bytes = 0;
  bool summary = false;
  bool list_modules = false;
  bool libipt_blocks = false;
  bool stack_per_unit = false;
  std::vector<std::string> threads;  // --threads values, each a comma-separated list
  std::string time_range;
  // Parsed from the above.
  std::vector<uint32_t> thread_ids;
  ptscope::decode::TimeRange window;
};

const char* Extension(OutputFormat format) {
  switch (format) {
    case OutputFormat::kText: return ".txt";
    case OutputFormat::kFolded: return ".folded";
    case OutputFormat::kInsns: return ".insns";
    case OutputFormat::kSummary: return ".summary.txt";
    case OutputFormat::kSummaryJson: return ".summary.json";
    case OutputFormat::kSpeedscope: return ".speedscope.json";
    default: return ".pftrace";
  }
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

OutputFormat FormatFromPath(const std::string& path) {
  if (EndsWith(path, ".summary.txt")) return OutputFormat::kSummary;
  if (EndsWith(path, ".summary.json")) return OutputFormat::kSummaryJson;
  if (EndsWith(path, ".speedscope.json")) return OutputFormat::kSpeedscope;
  if (EndsWith(path, ".txt")) return OutputFormat::kText;
  if (EndsWith(path, ".folded")) return OutputFormat::kFolded;
  if (EndsWith(path, ".insns")) return OutputFormat::kInsns;
  return OutputFormat::kPerfetto;
}

std::string DefaultOutput(const std::string& input, const std::string& dir, OutputFormat format) {
  std::string base = input;
  if (!dir.empty()) {
    size_t slash = base.rfind('/');
    if (slash != std::string::npos) base = base.substr(slash + 1);
  }
  for (const char* ext : {".ptar", ".data"}) {
    if (EndsWith(base, ext) && base.size() > std::string(ext).size()) {
      base.resize(base.size() - std::string(ext).size());
      break;
    }
  }
  return (dir.empty() ? "" : dir + "/") + base + Extension(format);
}

// A .ptar or a perf.data. The PT bytes stay in the file until they are decoded (see RunPipeline),
// the embedded blobs until they are used, one at a time, and a .ptar's sideband records until
// the sideband timeline reads them, a chunk at a time: memory does not grow with the capture.
ptscope::Result<ptscope::format::Archive> LoadInput(const std::string& path) {
  return ptscope::format::OpenCapture(
      path, ptscope::format::ReadOptions{.keep_pt_bytes = false, .keep_blob_bytes = false,
                                         .keep_sideband_bytes = false});
}

std::string Count(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}


// The stats that are data loss, one line each with what a count means; "none" when all are 0.
void PrintDataLoss(const ptscope::decode::DecodeStats& stats) {
  using ptscope::decode::Stat;
  bool any = false;
  for (size_t i = 0; i < ptscope::decode::kStatCount; ++i) {
    const Stat stat = static_cast<Stat>(i);
    const ptscope::decode::StatDescription& d = ptscope::decode::Describe(stat);
    if (d.severity != ptscope::decode::StatSeverity::kDataLoss || stats[stat] == 0) continue;
    if (!any) std::fprintf(stderr, "  data loss:\n");
    any = true;
    std::fprintf(stderr, "    %s: %s (%s)\n", d.name, Count(stats[stat]).c_str(), d.explanation);
  }
  if (!any) std::fprintf(stderr, "  data loss: none\n");
}

void PrintSummary(const std::string& input, const ptscope::decode::DecodeSummary& s,
                  OutputFormat format) {
  std::fprintf(stderr, "pt-decode: %s: %s thread%s, %s instructions", input.c_str(),
               Count(s.threads).c_str(), s.threads == 1 ? "" : "s", Count(s.instructions).c_str());
  if (s.last_ns >= s.first_ns && s.first_ns != UINT64_MAX) {
    std::fprintf(stderr, " over %s", ptscope::decode::FormatDuration(s.last_ns - s.first_ns).c_str());
  }
  std::fprintf(stderr, "\n");
  if (format != OutputFormat::kInsns && s.instructions != 0) {
    std::fprintf(stderr, "  symbolized code: %.1f%% of decoded instructions ran in named "
                 "functions\n",
                 100.0 * static_cast<double>(s.symbolized_instructions) / s.instructions);
  }
  PrintDataLoss(s.stats);
  if (s.stats.gaps() != 0 && s.traced_ns != 0 && format != OutputFormat::kInsns) {
    // What a gap loses is time: its instructions are unknown (and not counted above).
    char share[48];
    std::snprintf(share, sizeof share, " (%.1f%%)",
                  100.0 * static_cast<double>(s.gap_ns) / static_cast<double>(s.traced_ns));
    std::string line = ptscope::decode::FormatDuration(s.gap_ns) + " of the threads' " +
                       ptscope::decode::FormatDuration(s.traced_ns) + share +
                       ", their instructions unknown";
    if (s.threads_ending_in_gap != 0) {
      line += "; " + Count(s.threads_ending_in_gap) +
              (s.threads_ending_in_gap == 1 ? " thread's trace ends" : " threads' traces end") +
              " in a gap of unknown length";
    }
    std::fprintf(stderr, "  time in gaps: %s\n", line.c_str());
  }
  for (const auto& missing : s.missing) {
    if (missing.path == "[vdso]") {
      std::fprintf(stderr, "  missing module: [vdso]: the capture holds no copy of its bytes, so "
                   "code run there is a gap (pt-record and pt-emulate store it; perf.data does not)\n");
      continue;
    }
    std::string hex = ptscope::format::ToHex(missing.build_id);
    std::fprintf(stderr, "  missing module: %s (build id %s): its code was not found; pass "
                 "--symbols DIR with a directory holding that exact build%s\n",
                 missing.path.c_str(), hex.empty() ? "unknown" : hex.c_str(),
                 hex.size() > 2 ? (" (or DIR/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) +
                                   ")").c_str()
                                : "");
  }
  for (const std::string& note : s.notes) std::fprintf(stderr, "  note: %s\n", note.c_str());
  const auto& units = s.stack_units;
  if (units.reconciled + units.replayed != 0) {  // --jobs > 1: how the workers' stacks fared
    std::fprintf(stderr,
                 "  stack tracking per unit: %llu units reconciled from the workers, %llu "
                 "with a wrong guess, %llu tracked at the join only; %llu events copied, %llu "
                 "tracked at the join\n",
                 static_cast<unsigned long long>(units.reconciled),
                 static_cast<unsigned long long>(units.replayed),
                 static_cast<unsigned long long>(units.serial),
                 static_cast<unsigned long long>(units.copied_events),
                 static_cast<unsigned long long>(units.joined_events));
  }
  std::fprintf(stderr, "  wrote %s (%s)\n", s.output_path.c_str(),
               ptscope::decode::OutputFormatName(format));
  if (format == OutputFormat::kPerfetto) {
    std::fprintf(stderr, "  view it: open https://ui.perfetto.dev and drop the file in (the UI "
                         "reads it locally in the browser; nothing is uploaded)\n");
  }
}

// Exit statuses (README "Exit status").
constexpr int kComplete = 0, kFailed = 1, kUsageError = 2, kPartial = 3;

// The worse of two statuses: a usage error, failed, partial, then complete.
int Worse(int a, int b) {
  auto rank = [](int status) {
    return status == kUsageError ? 3 : status == kFailed ? 2 : status == kPartial ? 1 : 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

// Why a decode that wrote its output is partial (exit 3), each with what to do; empty: complete.
std::vector<std::string> PartialReasons(const ptscope::format::Archive& archive,
                                        const ptscope::decode::DecodeSummary& s) {
  using ptscope::decode::GapCause;
  std::vector<std::string> reasons;
  if (!archive.damage.empty()) {
    reasons.push_back("the input is damaged (" + std::to_string(archive.damage.size()) +
                      " damaged range" + (archive.damage.size() == 1 ? "" : "s") +
                      ", listed above): what was intact is decoded, with a gap where PT was lost");
  } else if (!archive.complete) {
    reasons.push_back("the capture was cut off (no end marker): what is there is decoded");
  }
  if (s.sideband_unread_chunks != 0) {
    reasons.push_back("the capture changed or went away while it was decoded: its sideband could "
                      "not all be read again (see the note above); decode it again from a copy "
                      "that is not being written to");
  }
  // Code that ran, not modules that were only mapped (those are listed, but lose nothing).
  const uint64_t missing_code = s.stats[ptscope::decode::GapStat(GapCause::kMissingCode)];
  if (missing_code != 0) {
    reasons.push_back("executed code was not found (" + Count(missing_code) + " gap" +
                      (missing_code == 1 ? "" : "s") +
                      " in the trace): its instructions are missing; the lines above say which "
                      "modules and where to put them");
  }
  const uint64_t errors = s.stats[ptscope::decode::GapStat(GapCause::kDecodeError)];
  if (errors != 0) {
    reasons.push_back(Count(errors) + " decode error" + (errors == 1 ? "" : "s") +
                      ": the trace could not be followed there (damaged PT, or code that is not "
                      "what ran)");
  }
  return reasons;
}

ptscope::decode::PipelineOptions SymbolOptions(const Options& options) {
  ptscope::decode::PipelineOptions pipeline;
  pipeline.symbol_dirs = options.symbol_dirs;
  pipeline.debuginfod_urls = options.debuginfod_urls;
  return pipeline;
}

// --list-modules: the JSON listing on stdout (or -o FILE). 0, or 3 when the archive is damaged
// or unfinished (modules mapped after the damage are not listed), 1 when it cannot be read.
int ListModules(const std::string& input, const std::string& output, const Options& options) {
  auto archive = LoadInput(input);
  if (!archive) {
    std::fprintf(stderr, "pt-decode: %s\n", archive.error().message.c_str());
    return kFailed;
  }
  // The decoder's version and own build id name it (ptscope-fleet keys its outputs on them).
  auto json = ptscope::decode::ListModulesJson(*archive, SymbolOptions(options),
                                               ptscope::format::PtscopeVersion(),
                                               ptscope::format::OwnBuildId());
  if (!json) {
    std::fprintf(stderr, "pt-decode: %s\n", json.error().message.c_str());
    return kFailed;
  }
  if (output.empty() || output == "-") {
    if (std::fwrite(json->data(), 1, json->size(), stdout) != json->size() ||
        std::fflush(stdout) != 0) {
      std::fprintf(stderr, "pt-decode: cannot write stdout: %s\n", std::strerror(errno));
      return kFailed;
    }
  } else {  // as every output file: put at its path only when whole (ptscope/output_file.h)
    auto file = ptscope::format::OutputFile::CreateReplacing(output, 0644);
    ptscope::Status written = file ? file->Write(json->data(), json->size()) : file.error();
    if (written) written = file->Commit();
    if (!written) {
      std::fprintf(stderr, "pt-decode: %s\n", written.error().message.c_str());
      return kFailed;
    }
  }
  return !archive->damage.empty() || !archive->complete ? kPartial : kComplete;
}

// Decodes one input; returns its exit status (kComplete, kPartial or kFailed) and says why in
// `why` (empty when complete).
int DecodeOne(const std::string& input, const std::string& output, OutputFormat format,
              const Options& options, std::string& why) {
  auto archive = LoadInput(input);
  if (!archive) {
    std::fprintf(stderr, "pt-decode: %s\n", archive.error().message.c_str());
    why = archive.error().message;
    return kFailed;
  }
  if (!archive->damage.empty()) {
    std::fprintf(stderr, "pt-decode: %s: %s; decoding what is intact\n", input.c_str(),
                 ptscope::format::DescribeDamage(archive->damage).c_str());
  } else if (!archive->complete) {
    std::fprintf(stderr, "pt-decode: %s: the capture has no end marker (the recorder was "
                 "stopped early?); decoding what is there\n", input.c_str());
  }
  ptscope::decode::PipelineOptions pipeline = SymbolOptions(options);
  pipeline.jobs = options.jobs;
  pipeline.unit_bytes = options.unit_bytes;
  pipeline.walker = !options.libipt_blocks;
  pipeline.stack_per_unit = options.stack_per_unit;
  pipeline.format = format;
  pipeline.output_path = output;
  pipeline.summary_json_path = options.summary_json;
  pipeline.threads = options.thread_ids;
  pipeline.time_from_ns = options.window.from_ns;
  pipeline.time_to_ns = options.window.to_ns;
  const bool tty = ::isatty(2) != 0;
  const auto start = std::chrono::steady_clock::now();
  bool printed = false;
  pipeline.progress = [&](uint64_t done, uint64_t total) {
    if (!tty) return;
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds < 1.0) return;
    const double percent =
        total == 0 ? 100.0 : 100.0 * static_cast<double>(done) / static_cast<double>(total);
    std::fprintf(stderr, "\rpt-decode: %s: %3.0f%% of the trace (%.1f s)", input.c_str(), percent,
                 seconds);
    printed = true;
  };
  auto summary = ptscope::decode::RunPipeline(*archive, pipeline);
  if (printed) std::fprintf(stderr, "\n");
  if (!summary) {
    std::fprintf(stderr, "pt-decode: %s\n", summary.error().message.c_str());
    why = summary.error().message;
    // --threads or --time-range selecting nothing the capture holds: a usage error.
    return summary.error().code == ptscope::Errc::kInvalidArgument ? kUsageError : kFailed;
  }
  PrintSummary(input, *summary, format);
  const std::vector<std::string> reasons = PartialReasons(*archive, *summary);
  for (const std::string& reason : reasons) {
    why += (why.empty() ? "" : "; ") + reason;
  }
  if (summary->instructions == 0) {  // an output, but with nothing in it
    why = "no instruction was decoded" + (why.empty() ? std::string() : ": " + why);
    std::fprintf(stderr, "  status: FAILED (exit 1): %s\n", why.c_str());
    return kFailed;
  }
  if (reasons.empty()) {
    std::fprintf(stderr, "  status: complete\n");
    return kComplete;
  }
  std::fprintf(stderr, "  status: PARTIAL (exit 3): %s\n", why.c_str());
  return kPartial;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  po::options_description visible("Options");
  visible.add_options()
      ("help,h", "show this help")
      ("output,o", po::value(&options.output), "output file (one input); default: the input "
       "name with the format's extension (.pftrace for perfetto)")
      ("output-dir", po::value(&options.output_dir), "output directory (several inputs); created if missing")
      ("format", po::value(&options.format), "perfetto|text|folded|insns|summary|summary-json|"
       "speedscope (for the offline viewer); default from the output's extension (.summary.txt, "
       ".summary.json, .speedscope.json, .txt, .folded, .insns), else perfetto")
      ("summary", po::bool_switch(&options.summary), "per-function calls, inclusive/self/max "
       "times and instructions as a sorted table instead of slices (= --format summary); with "
       "--format json as JSON (docs/DECODE_JSON.md; = --format summary-json, *.summary.json)")
      ("summary-json", po::value(&options.summary_json), "also write the JSON summary of the "
       "same decode to FILE: one decode, both outputs (as --summary --format json alone would "
       "write it); one input")
      ("list-modules", po::bool_switch(&options.list_modules), "decode nothing: print as JSON "
       "every module the capture maps and the files a decode with the same --symbols and "
       "--debuginfod uses for it (docs/DECODE_JSON.md)")
      ("version", "print pt-decode's version and build id")
      ("threads", po::value(&options.threads), "decode only these threads or processes: "
       "comma-separated tids or pids, e.g. 1234,1240; repeatable")
      ("time-range", po::value(&options.time_range), "decode only START:END, relative to the "
       "capture start, with units ns/us/ms/s; either side may be empty: 2ms:5ms, 1.5s:, :500us")
      ("symbols", po::value(&options.symbol_dirs), "directory with binaries/debug files "
       "(plain or .build-id layout); repeatable")
      ("debuginfod", po::value(&options.debuginfod_urls), "debuginfod server URL (http, https, "
       "file://) asked last for missing binaries/debug info by build id; repeatable; default "
       "$DEBUGINFOD_URLS; without either nothing is fetched")
      ("jobs,j", po::value(&options.jobs_text), "decoder threads, 1 to 256 (default: every "
       "core); the output is the same for every value")
      ("libipt-blocks", po::bool_switch(&options.libipt_blocks), "walk the code with libipt's "
       "block decoder instead of ptscope's own walker (about half as fast; the output is the "
       "same)");
  po::options_description hidden;
  hidden.add_options()("input", po::value(&options.inputs))
      // Bytes of PT per decode unit: tests use tiny units to check that joins are exact.
      ("unit-bytes", po::value(&options.unit_bytes_text))
      // Stack tracking per decode unit on the workers, reconciled at the join (off by default:
      // it costs more than it saves so far, see PipelineOptions::stack_per_unit).
      ("stack-per-unit", po::bool_switch(&options.stack_per_unit));
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "pt-decode: %s\n%s(try --help)\n", e.what(), kUsage);
    return kUsageError;
  }
  if (vm.count("help")) {
    std::cout << kUsage << visible << kExitStatusHelp;
    return 0;
  }
  if (vm.count("version")) {
    std::printf("%s\n", ptscope::format::VersionLine("pt-decode").c_str());
    return 0;
  }
  if (options.inputs.empty()) {
    std::fprintf(stderr, "pt-decode: no input given\n%s(try --help)\n", kUsage);
    return kUsageError;
  }
  if (options.inputs.size() > 1 && !options.output.empty()) {
    std::fprintf(stderr, "pt-decode: -o names one output but %zu inputs were given; use "
                 "--output-dir DIR\n", options.inputs.size());
    return kUsageError;
  }
  if (vm.count("jobs")) {  // given, even empty: an empty value is refused, not the default
    auto jobs = ptscope::decode::ParseJobs(options.jobs_text);
    if (!jobs) {
      std::fprintf(stderr, "pt-decode: %s\n", jobs.error().message.c_str());
      return kUsageError;
    }
    options.jobs = *jobs;
  } else {
    options.jobs = std::clamp(std::thread::hardware_concurrency(), 1u,
                              ptscope::decode::kMaxJobs);
  }
  if (vm.count("unit-bytes")) {
    auto bytes = ptscope::decode::ParseUnitBytes(options.unit_bytes_text);
    if (!bytes) {
      std::fprintf(stderr, "pt-decode: %s\n", bytes.error().message.c_str());
      return kUsageError;
    }
    options.unit_bytes = *bytes;
  }
  if (!options.summary_json.empty() && options.inputs.size() > 1) {
    std::fprintf(stderr, "pt-decode: --summary-json names one file but %zu inputs were given\n",
                 options.inputs.size());
    return kUsageError;
  }
  if (options.summary) {
    if (options.format == "json") options.format = "summary-json";
    if (!options.format.empty() && options.format != "summary" &&
        options.format != "summary-json") {
      std::fprintf(stderr, "pt-decode: --summary and --format %s contradict each other; give "
                   "one of them\n", options.format.c_str());
      return kUsageError;
    }
    if (options.format.empty()) options.format = "summary";
  } else if (options.format == "json") {
    std::fprintf(stderr, "pt-decode: --format json is the summary's encoding: add --summary\n");
    return kUsageError;
  }
  for (const std::string& list : options.threads) {
    auto ids = ptscope::decode::ParseThreadList(list);
    if (!ids) {
      std::fprintf(stderr, "pt-decode: %s\n", ids.error().message.c_str());
      return kUsageError;
    }
    for (uint32_t id : *ids) {
      if (std::find(options.thread_ids.begin(), options.thread_ids.end(), id) ==
          options.thread_ids.end()) {
        options.thread_ids.push_back(id);
      }
    }
  }
  if (vm.count("time-range")) {
    auto window = ptscope::decode::ParseTimeRange(options.time_range);
    if (!window) {
      std::fprintf(stderr, "pt-decode: %s\n", window.error().message.c_str());
      return kUsageError;
    }
    options.window = *window;
  }
  OutputFormat format = OutputFormat::kPerfetto;
  bool format_given = !options.format.empty();
  if (format_given) {
    if (options.format == "perfetto") format = OutputFormat::kPerfetto;
    else if (options.format == "text") format = OutputFormat::kText;
    else if (options.format == "folded") format = OutputFormat::kFolded;
    else if (options.format == "insns") format = OutputFormat::kInsns;
    else if (options.format == "summary") format = OutputFormat::kSummary;
    else if (options.format == "summary-json") format = OutputFormat::kSummaryJson;
    else if (options.format == "speedscope") format = OutputFormat::kSpeedscope;
    else {
      std::fprintf(stderr, "pt-decode: --format %s: expected perfetto, text, folded, insns, "
                   "summary, summary-json or speedscope\n", options.format.c_str());
      return kUsageError;
    }
  } else if (!options.output.empty()) {
    format = FormatFromPath(options.output);
  }
  if (!options.summary_json.empty() && format == OutputFormat::kInsns) {
    std::fprintf(stderr, "pt-decode: --summary-json: an instruction listing has no call slices "
                 "to summarize; use it with perfetto, text, folded, speedscope or summary\n");
    return kUsageError;
  }
  // Before any thread: libdebuginfod reads DEBUGINFOD_URLS, and setenv is not thread-safe.
  ptscope::symbols::DebuginfodFetcher::SetUpProcess(
      options.debuginfod_urls, ::isatty(2) ? [](const ptscope::symbols::DebuginfodProgress& p) {
        std::fputs(ptscope::symbols::DebuginfodProgressLine(p).c_str(), stderr);
      } : ptscope::symbols::DebuginfodProgressFn());
  if (options.list_modules) {
    if (options.inputs.size() != 1) {
      std::fprintf(stderr, "pt-decode: --list-modules lists one input, %zu given\n",
                   options.inputs.size());
      return kUsageError;
    }
    return ListModules(options.inputs[0], options.output, options);
  }
  if (options.output.empty()) {  // two inputs named alike would write, then replace, one file
    std::map<std::string, const std::string*> first_input_of;
    for (const std::string& input : options.inputs) {
      auto [at, added] = first_input_of.emplace(
          DefaultOutput(input, options.output_dir, format), &input);
      if (!added) {
        std::fprintf(stderr, "pt-decode: %s and %s would both be written to %s; decode them "
                     "into different --output-dir directories, or rename one\n",
                     at->second->c_str(), input.c_str(), at->first.c_str());
        return kUsageError;
      }
    }
  }
  if (!options.output_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options.output_dir, error);
    if (error) {
      std::fprintf(stderr, "pt-decode: --output-dir %s: cannot create it: %s\n",
                   options.output_dir.c_str(), error.message().c_str());
      return kFailed;
    }
  }
  int status = kComplete;
  std::vector<std::pair<int, std::string>> report;  // per input: status, why
  for (const std::string& input : options.inputs) {
    std::string output = !options.output.empty()
                             ? options.output
                             : DefaultOutput(input, options.output_dir, format);
    std::string why;
    const int one = DecodeOne(input, output, format, options, why);
    report.emplace_back(one, why);
    status = Worse(status, one);
  }
  if (options.inputs.size() > 1) {  // batch: each input's status, then the worst is the exit
    size_t counts[4] = {};
    for (const auto& [one, why] : report) ++counts[one];
    std::fprintf(stderr, "pt-decode: %zu inputs: %zu complete, %zu partial, %zu failed\n",
                 options.inputs.size(), counts[kComplete], counts[kPartial], counts[kFailed]);
    for (size_t i = 0; i < report.size(); ++i) {
      const auto& [one, why] = report[i];
      std::fprintf(stderr, "  %s: %s%s%s\n", options.inputs[i].c_str(),
                   one == kComplete ? "complete" : one == kPartial ? "partial (3)" : "failed (1)",
                   why.empty() ? "" : ": ", why.c_str());
    }
  }
  return status;
}
