// Reader for /tmp/perf-PID.map files (formats.md §4): names of JIT code, no bytes, no time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ptscope/symbols.h"  // PerfMapEntry

namespace ptscope::symbols {


struct PerfMap {
  std::vector<PerfMapEntry> entries;  // in file order (later lines win for the same address)
  uint64_t bad_lines = 0;
  std::string first_bad;              // "SOURCE:LINE: ..." for the first malformed line
};

// `START SIZE name` per line; hex with or without 0x, either case; the name runs to the end of
// the line (spaces included). Malformed lines are skipped and counted.
PerfMap ParsePerfMap(std::string_view text, const std::string& source);

}  // namespace ptscope::symbols
