// JitTimeMap: jitdump timestamps on the trace clock, for JitCodeStore (declared in
// ptscope/symbols.h with the rest of the JIT code store).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "jitdump_reader.h"
#include "perf_map_reader.h"
#include "ptscope/format.h"
#include "ptscope/symbols.h"

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

}  // namespace ptscope::symbols
