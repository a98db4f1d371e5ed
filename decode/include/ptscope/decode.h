// ptscope's decoder, as its users see it: options in, a capture decoded into one output file
// (Perfetto trace, text call tree, folded stacks, per-function summary or instruction listing),
// a summary out. pt-decode's main() and every other user outside decode/ include only this file;
// the stages behind RunPipeline live in decode/src/ (decode/README.md draws them).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ptscope/format.h"
#include "ptscope/result.h"

namespace ptscope::decode {

class ResolvedModules;

// kSummary: per-function call counts and times (no slices written); the fast overview.
// kSummaryJson: the same as JSON, with the decode's totals (docs/DECODE_JSON.md).
enum class OutputFormat { kPerfetto, kText, kFolded, kInsns, kSummary, kSummaryJson, kSpeedscope };
const char* OutputFormatName(OutputFormat format);

struct PipelineOptions {
  std::vector<std::string> symbol_dirs;
  // debuginfod servers (http, https, file://); empty: DEBUGINFOD_URLS, else never asked.
  std::vector<std::string> debuginfod_urls;
  unsigned jobs = 1;
  OutputFormat format = OutputFormat::kPerfetto;
  std::string output_path;
  // Also the JSON summary of the same decode (OutputFormat::kSummaryJson) into this file; one
  // decode, both outputs exactly as each alone. Empty: none. Not with kInsns.
  std::string summary_json_path;
  // Decode only these threads (tids) or processes (pids); empty: all.
  std::vector<uint32_t> threads;
  // Decode only this window, in ns relative to the earliest timestamp of the capture
  // (PSB segments entirely outside it are skipped without decoding).
  uint64_t time_from_ns = 0;
  uint64_t time_to_ns = UINT64_MAX;
  // Bytes of PT per decode unit (0: the default). Only tests change it: the output must not
  // depend on it.
  size_t unit_bytes = 0;
  // Context-switch runs (per-CPU captures) held in memory before each CPU's schedule is looked up
  // in its sideband chunks, read again as needed, instead (only when the archive was read without
  // its sideband bytes: format::ReadOptions::keep_sideband_bytes); 0: the default, 256 K. Only
  // tests change it: the output must not depend on it.
  size_t held_schedule_runs = 0;
  // Walk code with QueryWalker (libipt's query decoder and our own instruction walk) instead of
  // libipt's block decoder; the output is the same.
  bool walker = true;
  // With jobs > 1: per-thread units' stacks tracked on the workers and reconciled at the join
  // (stack/unit_speculation.cpp); the output is the same. Off by default until measured to pay:
  // the workers' tracking adds instructions, and only a join that was the bottleneck gains.
  bool stack_per_unit = false;
  // Called after each decode unit with (PT bytes decoded or skipped so far, PT bytes in all);
  // may be empty.
  std::function<void(uint64_t, uint64_t)> progress;
  // Decode without writing any output (options.output_path is not opened): the summary's
  // counts only, e.g. per_thread.
  bool count_only = false;
  // Modules already resolved and symbols already loaded (ResolvedModules below); null: the
  // decode finds and loads them itself, from the archive's blobs and the options above.
  ResolvedModules* resolved = nullptr;
};

// The files found for a capture's modules and the symbols loaded from them, kept from one decode
// to the next: a caller that decodes many captures of one program (the decode fuzz target, every
// input around one fixed binary image) finds and loads them once instead of per decode, where
// writing out the embedded binaries and inflating their debug info costs far more than the
// decode. Made from the archive whose embedded blobs it uses (which must outlive it) and the
// options' symbol_dirs and debuginfod_urls; a RunPipeline given it uses those, not the decoded
// archive's blobs, and its notes (refused files, symbols that failed to load) accumulate over the
// decodes. One decode at a time.
class ResolvedModules {
 public:
  static Result<std::unique_ptr<ResolvedModules>> ForArchive(const format::Archive& archive,
                                                             const PipelineOptions& options);
  ~ResolvedModules();
  struct State;  // names/capture_resolver.h
  State& state() { return *state_; }

 private:
  explicit ResolvedModules(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Why trace is missing where a gap is (each gap is also counted: Stat below).
enum class GapCause : uint8_t {
  kOverflow,       // OVF packet: the CPU dropped trace
  kLostData,       // AUX/snapshot data missing between pieces (TRUNCATED, lost bytes)
  kDecodeError,    // libipt could not follow the trace (message says why)
  kMissingCode,    // no code bytes for the address (module not found / not mapped)
  kTraceStart,     // not a gap: first sync point of a stream (kept for symmetry; never emitted)
};
const char* GapCauseName(GapCause cause);

// A duration as the summaries print it: "9794 ns", "15.825 us", "1.500 ms", "12.000 s".
std::string FormatDuration(uint64_t ns);

// What a decode lost, and how it rebuilt what the trace shows: one typed table of counters, each
// with a name, a severity and an explanation (Perfetto's trace_processor stats are the model).
// The summary prints the data-loss and error rows that are not zero; tests read the counts.
enum class StatSeverity : uint8_t {
  kInfo,      // how the decode went; nothing is missing because of it
  kDataLoss,  // trace the output lacks (an in-band gap each, or code no thread is named for)
};
const char* StatSeverityName(StatSeverity severity);

enum class Stat : uint8_t {
  // One per gap cause, in GapCause's order: each counted gap is an in-band gap in the output.
  kOverflowGaps,
  kLostDataGaps,
  kDecodeErrorGaps,
  kMissingCodeGaps,
  kUnattributedInstructions,
  kWalkerFallbackUnits,
  // The stack tracker's reconstruction, summed over threads.
  kCalls,
  kReturns,
  kTailCalls,
  kLateralJumps,
  kUnwinds,
  kUnwoundFrames,
  kReanchors,
  kInferredFrames,
  kInlinedSlices,
  kSyscalls,
  kUntraced,
  kAsyncHandlers,
  kCorrectedCallers,
  kTriggers,
  kFoldedLevels,
  kFoldedFrames,
  kBufferFlushesAtBound,
  kClampedTimes,
  kPacketFallbackUnits,
  kCount,  // not a stat
};
constexpr size_t kStatCount = static_cast<size_t>(Stat::kCount);

struct StatDescription {
  const char* name;         // snake_case, stable (machine-readable summaries key on it)
  StatSeverity severity;
  const char* explanation;  // what one count means, for a person reading the summary
};
const StatDescription& Describe(Stat stat);
// The gap-count stat of a cause (kTraceStart has none: kCount).
Stat GapStat(GapCause cause);

struct DecodeStats {
  std::array<uint64_t, kStatCount> counts{};
  uint64_t& operator[](Stat stat) { return counts[static_cast<size_t>(stat)]; }
  uint64_t operator[](Stat stat) const { return counts[static_cast<size_t>(stat)]; }
  void Add(const DecodeStats& other) {
    for (size_t i = 0; i < kStatCount; ++i) counts[i] += other.counts[i];
  }
  // Gaps of every cause.
  uint64_t gaps() const;
};

// A module whose code ran but whose bytes were not found (its code is a gap).
struct MissingModule {
  std::string path;
  std::vector<uint8_t> build_id;
};

// One decoded thread, for listings (what --threads can select).
struct ThreadCount {
  uint32_t pid = 0, tid = 0;
  std::string process, thread;  // names from the sideband, empty when unknown
  uint64_t instructions = 0;
};

struct DecodeSummary {
  uint64_t threads = 0;
  uint64_t instructions = 0;
  uint64_t symbolized_instructions = 0;   // instructions retired in named functions
  // Summed over threads: the time from each thread's first event to its last, and the part of
  // it in gaps (from a gap to the next event: trace lost, instructions unknown).
  uint64_t traced_ns = 0, gap_ns = 0;
  uint64_t threads_ending_in_gap = 0;     // their last gap's length is unknown (not in gap_ns)
  uint64_t first_ns = UINT64_MAX, last_ns = 0;
  DecodeStats stats;                      // data loss and reconstruction counts
  std::vector<MissingModule> missing;     // modules whose code was not found
  std::vector<std::string> notes;         // refused files, sideband damage, decode errors, ...
  // Sideband chunks that could not be read again (the archive changed or went away during the
  // decode; format::ReadOptions::keep_sideband_bytes): their records are missing (a note says
  // which), so the output is partial.
  uint64_t sideband_unread_chunks = 0;
  // Per-thread decode units by how their stack was tracked (--jobs > 1): from a worker's
  // speculation reconciled whole, with a wrong guess (the join tracked events until its stack
  // and the worker's agreed again), or at the join only; and their events copied from the
  // workers or run at the join. Not part of any output (it depends on --jobs).
  struct StackUnits {
    uint64_t reconciled = 0, replayed = 0, serial = 0;
    uint64_t copied_events = 0, joined_events = 0;
  } stack_units;
  std::vector<ThreadCount> per_thread;    // every thread decoded
  std::string output_path;
};

// Decodes `archive` into options.output_path. Fails only when nothing usable can be produced
// (no PT data, output not writable); trace damage is counted in the summary. PT bytes the archive
// holds move out of archive.pt_data (so that they are held once); PT chunks it read without their
// bytes (format::ReadOptions::keep_pt_bytes = false) are read again from archive.path as the units
// are cut (one chunk per stream being cut at a time: see parallel/unit_planner.h); a chunk that no
// longer reads ends its piece with an in-band decode-error gap. The rest of the archive is left as
// it was.
Result<DecodeSummary> RunPipeline(format::Archive& archive, const PipelineOptions& options);

// `pt-decode --list-modules`: every module the archive's sideband maps, with the files a decode
// with `options` (symbol_dirs, debuginfod_urls) uses for it, found by the same resolver, as JSON
// text in the schema docs/DECODE_JSON.md specifies. `decoder_version` and `decoder_build_id`
// name the decoder (pt-decode's version and its own ELF build id). Fails only as ReadArchive
// would; a module whose files are not found is listed with nulls.
inline constexpr int kModuleListingJsonVersion = 1;
Result<std::string> ListModulesJson(format::Archive& archive, const PipelineOptions& options,
                                    const std::string& decoder_version,
                                    const std::vector<uint8_t>& decoder_build_id);

}  // namespace ptscope::decode
