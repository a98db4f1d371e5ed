// Constants and small helpers shared by the perf.data reader and writer. format/PERF_DATA.md is
// the normative description of every number here; keep the two in step.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ptscope::format::perf_data {

inline constexpr char kMagic[8] = {'P', 'E', 'R', 'F', 'I', 'L', 'E', '2'};
inline constexpr char kMagicSwapped[8] = {'2', 'E', 'L', 'I', 'F', 'R', 'E', 'P'};
inline constexpr char kMagicV1[8] = {'P', 'E', 'R', 'F', 'F', 'I', 'L', 'E'};
inline constexpr uint64_t kFileHeaderSize = 104;
inline constexpr uint64_t kPipeHeaderSize = 16;
inline constexpr uint64_t kSectionSize = 16;          // perf_file_section {offset, size}
inline constexpr uint64_t kFeatureBitmapOffset = 72;  // 4 x u64 after the three sections
inline constexpr uint32_t kAttrSizeWritten = 128;     // PERF_ATTR_SIZE_VER7, what perf 6.1 writes
inline constexpr uint32_t kAttrSizeMin = 64;          // PERF_ATTR_SIZE_VER0
inline constexpr uint32_t kAttrSizeMax = 4096;        // sanity bound for untrusted input

// perf_event_attr field offsets.
inline constexpr size_t kAttrType = 0, kAttrSize = 4, kAttrConfig = 8, kAttrSamplePeriod = 16,
                        kAttrSampleType = 24, kAttrReadFormat = 32, kAttrFlags = 40;
// attr flag bits (the bitfield word at kAttrFlags).
inline constexpr uint64_t kAttrDisabled = 1ull << 0, kAttrExcludeUser = 1ull << 4,
                          kAttrExcludeKernel = 1ull << 5, kAttrExcludeHv = 1ull << 6,
                          kAttrSampleIdAll = 1ull << 18, kAttrMmap2 = 1ull << 23,
                          kAttrContextSwitch = 1ull << 26, kAttrMmap = 1ull << 8,
                          kAttrComm = 1ull << 9, kAttrTask = 1ull << 13,
                          kAttrCommExec = 1ull << 24;

// Feature bits (adds_features bitmap) we read or write.
enum Feature : int {
  kFeatBuildId = 2,
  kFeatHostname = 3,
  kFeatOsRelease = 4,
  kFeatVersion = 5,
  kFeatCpuid = 9,
  kFeatCmdline = 11,
  kFeatAuxtrace = 18,
};
inline constexpr int kFeatureBits = 256;

// perf-tool record types (>= 64) in the data section.
inline constexpr uint32_t kUserRecordStart = 64;
inline constexpr uint32_t kRecordHeaderBuildId = 67;
inline constexpr uint32_t kRecordFinishedRound = 68;
inline constexpr uint32_t kRecordAuxtraceInfo = 70;
inline constexpr uint32_t kRecordAuxtrace = 71;
inline constexpr uint32_t kRecordTimeConv = 79;
inline constexpr uint32_t kRecordCompressed = 81;
inline constexpr uint32_t kAuxtraceIntelPt = 1;   // auxtrace_info.type
inline constexpr uint64_t kAuxtraceRecordSize = 48;
inline constexpr uint16_t kMiscBuildIdSize = 1u << 15;  // build_id_event: size byte is valid

// AUXTRACE_INFO priv[] indices for Intel PT (perf util/intel-pt.h).
enum PrivIndex : int {
  kPrivPmuType = 0,
  kPrivTimeShift,
  kPrivTimeMult,
  kPrivTimeZero,
  kPrivCapUserTimeZero,
  kPrivTscBit,
  kPrivNoretcompBit,
  kPrivHaveSchedSwitch,
  kPrivSnapshotMode,
  kPrivPerCpuMmaps,
  kPrivMtcBit,
  kPrivMtcFreqBits,
  kPrivTscCtcN,
  kPrivTscCtcD,
  kPrivCycBit,
  kPrivMaxNonturboRatio,
  kPrivFilterStrLen,
  kPrivCount,  // 17 fixed entries, then the filter string
};

// Intel PT attr.config bits (arch/x86/events/intel/pt.c format).
inline constexpr uint64_t kCfgPt = 1ull << 0, kCfgCyc = 1ull << 1, kCfgMtc = 1ull << 9,
                          kCfgTsc = 1ull << 10, kCfgNoretcomp = 1ull << 11,
                          kCfgBranch = 1ull << 13, kCfgMtcPeriodMask = 0xfull << 14,
                          kCfgCycThreshMask = 0xfull << 19, kCfgPsbPeriodMask = 0xfull << 24;

// Where the sample_id trailer fields sit (bytes from the start of the trailer), from sample_type.
// The kernel order is TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER (perf_event__id_header).
struct TrailerLayout {
  int tid = -1, time = -1, id = -1, stream_id = -1, cpu = -1, identifier = -1;
  size_t size = 0;
};
inline constexpr uint64_t kTrailerBits = (1ull << 1) | (1ull << 2) | (1ull << 6) | (1ull << 9) |
                                         (1ull << 7) | (1ull << 16);
inline TrailerLayout MakeTrailerLayout(uint64_t sample_type, bool sample_id_all) {
  TrailerLayout t;
  if (!sample_id_all) return t;
  int at = 0;
  auto take = [&](uint64_t bit, int* field) {
    if (sample_type & bit) {
      *field = at;
      at += 8;
    }
  };
  take(1ull << 1, &t.tid);
  take(1ull << 2, &t.time);
  take(1ull << 6, &t.id);
  take(1ull << 9, &t.stream_id);
  take(1ull << 7, &t.cpu);
  take(1ull << 16, &t.identifier);
  t.size = static_cast<size_t>(at);
  return t;
}

}  // namespace ptscope::format::perf_data
