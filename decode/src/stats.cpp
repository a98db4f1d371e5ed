// The stats table (ptscope/decode.h): names, severities and explanations.
#include <array>

#include "ptscope/decode.h"

namespace ptscope::decode {
namespace {

using enum StatSeverity;
// In Stat's order (checked below).
constexpr std::array<StatDescription, kStatCount> kStats = {{
    {"overflow_gaps", kDataLoss,
     "trace overflows (OVF): the CPU dropped trace; every open slice closes at the gap"},
    {"lost_data_gaps", kDataLoss,
     "trace bytes lost between pieces of a stream (AUX or snapshot data not captured)"},
    {"decode_error_gaps", kDataLoss,
     "places the decoder could not follow the trace (the notes name the first of each thread); "
     "it resumes at the next PSB"},
    {"missing_code_gaps", kDataLoss,
     "code executed where no code bytes were found (module missing: see the missing modules)"},
    {"unattributed_instructions", kDataLoss,
     "instructions of per-CPU trace that ran while the sideband names no (selected) thread on "
     "that CPU"},
    {"walker_fallback_units", kInfo,
     "decode units holding trace the walker does not model: libipt's block decoder walked them"},
    {"calls", kInfo, "calls followed (each opens a slice)"},
    {"returns", kInfo, "returns followed (each closes the slice it returns from)"},
    {"tail_calls", kInfo, "jumps to another function's entry (the top frame was replaced)"},
    {"lateral_jumps", kInfo, "jumps into the middle of another function not on the stack"},
    {"unwinds", kInfo, "returns or jumps that closed several frames at once (longjmp, throw)"},
    {"unwound_frames", kInfo, "frames closed by those unwinds"},
    {"reanchors", kInfo,
     "returns that matched no open frame: the thread's stack was restarted there"},
    {"inferred_frames", kInfo, "callers whose start the trace did not show (inferred)"},
    {"inlined_slices", kInfo, "slices of inlined functions"},
    {"syscalls", kInfo, "[syscall] slices"},
    {"untraced", kInfo, "[untraced] slices (tracing stopped for another reason)"},
    {"async_handlers", kInfo, "signal handlers nested under the interrupted frame"},
    {"corrected_callers", kInfo,
     "calls from outside the top frame's function: a transfer was missed, the frame replaced"},
    {"triggers", kInfo, "trigger markers shown"},
    {"folded_levels", kInfo, "call levels folded below the maximum depth (sum over excursions)"},
    {"folded_frames", kInfo, "slices not written because they lay below the maximum depth"},
    {"buffer_flushes_at_bound", kInfo,
     "times a thread's held-back slices reached their bound and were written out early "
     "(callers found later then start at that point, not at the trace start)"},
    {"clamped_times", kInfo, "events whose time went backwards and were clamped"},
    {"packet_fallback_units", kInfo,
     "decode units holding packets our query decoder does not model (or damage): libipt's "
     "query decoder read them"},
}};

}  // namespace

const char* StatSeverityName(StatSeverity severity) {
  switch (severity) {
    case kInfo: return "info";
    case kDataLoss: return "data_loss";
  }
  return "?";
}

const StatDescription& Describe(Stat stat) { return kStats[static_cast<size_t>(stat)]; }

Stat GapStat(GapCause cause) {
  switch (cause) {
    case GapCause::kOverflow: return Stat::kOverflowGaps;
    case GapCause::kLostData: return Stat::kLostDataGaps;
    case GapCause::kDecodeError: return Stat::kDecodeErrorGaps;
    case GapCause::kMissingCode: return Stat::kMissingCodeGaps;
    case GapCause::kTraceStart: break;
  }
  return Stat::kCount;
}

uint64_t DecodeStats::gaps() const {
  return (*this)[Stat::kOverflowGaps] + (*this)[Stat::kLostDataGaps] +
         (*this)[Stat::kDecodeErrorGaps] + (*this)[Stat::kMissingCodeGaps];
}

}  // namespace ptscope::decode
