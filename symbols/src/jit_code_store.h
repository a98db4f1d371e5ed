// JIT code over time, per process: code regions from jitdump LOAD/MOVE records (bytes, name,
// line table), each valid from its load time until a later LOAD or MOVE overlaps it, plus names
// from perf maps (no bytes, no time). Serves code bytes to the PT decoder and names to frames.
//
//   pid 7  [0x1000,0x1040) jit_add v1  ├──────────┤ replaced by a LOAD at t2
//          [0x1000,0x1060) jit_add v2             ├──────────────►
//          [0x2000,0x2020) jit_mul     ├────┤ MOVEd to 0x3000 at t1; [0x3000,..) ├─────►
//
// Thread-safe for concurrent const lookups once built.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "jitdump_reader.h"
#include "perf_map_reader.h"
#include "ptscope/format.h"

namespace ptscope::symbols {

// Puts jitdump timestamps on the trace clock. TSC -> trace ns through the archive's time
// conversion (time.shift/mult/zero); CLOCK_MONOTONIC ns -> TSC by interpolating the archive's
// TimeSyncChunk pairs (extrapolating from the nearest segment outside them).
class JitTimeMap {
 public:
  static JitTimeMap FromArchive(const format::Archive& archive);
  void SetConversion(uint16_t shift, uint32_t mult, uint64_t zero);
  void AddPair(uint64_t tsc, uint64_t monotonic_ns);  // any order
  uint64_t TscToNs(uint64_t tsc) const;
  uint64_t MonotonicToTsc(uint64_t monotonic_ns) const;
  uint64_t MonotonicToNs(uint64_t monotonic_ns) const { return TscToNs(MonotonicToTsc(monotonic_ns)); }
  bool has_pairs() const { return !by_monotonic_.empty(); }

 private:
  uint16_t shift_ = 0;
  uint32_t mult_ = 0;
  uint64_t zero_ = 0;
  bool identity_ = true;                              // no conversion: TSC values are ns
  std::vector<std::pair<uint64_t, uint64_t>> by_monotonic_;  // (monotonic ns, tsc), sorted
};

struct JitRegion {
  uint64_t start = 0, end = 0;  // [start, end)
  uint64_t valid_from = 0, valid_until = UINT64_MAX;  // trace ns
  std::string name;
  std::shared_ptr<const std::vector<uint8_t>> code;         // end - start bytes
  std::shared_ptr<const std::vector<JitLineEntry>> lines;   // addresses as loaded (see delta)
  // Added to line-table addresses after MOVEs, modulo 2^64 (a chain of moves may go up and down
  // the address space; the sum of the steps, wrapped, is still where the code is now).
  uint64_t line_delta = 0;
};

struct JitName {
  std::string name;
  uint64_t start = 0;   // entry of the function (region start)
  std::string file;     // from the jitdump line table, when present
  uint32_t line = 0;
  bool has_code = false;  // false: known only from a perf map
};

class JitCodeStore {
 public:
  // Adds the LOAD/MOVE history of one jitdump of `pid`.
  void AddJitdump(uint32_t pid, const JitDump& dump, const JitTimeMap& time);
  // Adds perf-map names of `pid` (used when no jitdump region holds the address).
  void AddPerfMap(uint32_t pid, const PerfMap& map);

  // The jitdump region holding `address` at `time_ns`. When none is valid exactly then (JIT
  // clocks are only approximately aligned with the trace), the region whose validity is closest
  // to `time_ns` is used.
  const JitRegion* Lookup(uint32_t pid, uint64_t address, uint64_t time_ns) const;
  // Copies up to `size` code bytes at `address` (never across the region's end); 0 if none.
  size_t ReadCode(uint32_t pid, uint64_t address, uint64_t time_ns, uint8_t* buffer,
                  size_t size) const;
  // Name for `address`: jitdump first, then the perf map.
  std::optional<JitName> Name(uint32_t pid, uint64_t address, uint64_t time_ns) const;
  bool empty() const { return regions_.empty() && perf_maps_.empty(); }
  bool HasCode(uint32_t pid) const { return regions_.count(pid) != 0; }

  // Every kJitdump / kPerfMap blob of `archive`; damage goes to `notes` (one line each).
  static JitCodeStore FromArchive(const format::Archive& archive, std::vector<std::string>& notes);

 private:
  struct PidRegions {
    std::vector<JitRegion> regions;                // in load order
    std::multimap<uint64_t, size_t> by_start;      // start -> index
    uint64_t max_size = 0;
  };
  void Insert(PidRegions& pid_regions, JitRegion region);
  std::vector<size_t> Holding(const PidRegions& pid_regions, uint64_t address) const;

  std::unordered_map<uint32_t, PidRegions> regions_;
  std::unordered_map<uint32_t, std::map<uint64_t, PerfMapEntry>> perf_maps_;  // by start
};

}  // namespace ptscope::symbols
