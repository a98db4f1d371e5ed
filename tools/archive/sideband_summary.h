// Processes and threads seen in an archive's sideband (COMM/FORK/EXIT records), and record counts.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ptscope/format.h"

namespace ptscope::tools {

struct ThreadSummary {
  std::string comm;
  bool exited = false;
};

struct ProcessSummary {
  uint32_t ppid = 0;      // 0 when no FORK record named it
  std::string comm;       // of the main thread, last COMM wins
  bool exec = false;      // a COMM record with the exec flag was seen
  bool exited = false;    // the main thread exited
  std::map<uint32_t, ThreadSummary> threads;
};

struct SidebandSummary {
  std::map<uint32_t, ProcessSummary> processes;
  std::map<uint32_t, uint64_t> records_by_type;  // perf record type -> count
  uint64_t records = 0;
  uint64_t lost_events = 0;       // sum of LOST records' counts
  uint64_t aux_truncated = 0;     // AUX records with the truncated flag
  std::vector<std::string> problems;  // malformed sideband (reported, not fatal)
};

SidebandSummary SummarizeSideband(const format::Archive& archive);

// "MMAP2", "COMM", ... or "type N".
std::string RecordTypeName(uint32_t type);

}  // namespace ptscope::tools
