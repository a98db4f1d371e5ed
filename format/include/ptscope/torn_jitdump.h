// A jitdump that ended inside a record (or its header) when the capture stopped: the recorder
// kept its whole records, and the code logged after them has no bytes. Carried in the archive as
// metadata keys jit.torn.<n>.* (FORMAT.md "Metadata keys"), so that a decoder on another machine
// can say why that code is a gap, not only the recorder's stderr.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::format {

// Code a perf map names that the jitdump's whole records lack.
struct TornJitCode {
  uint64_t address = 0;
  uint64_t size = 0;
  std::string name;
  bool operator==(const TornJitCode&) const = default;
};

struct TornJitdump {
  uint32_t pid = 0;
  std::string jitdump;         // the jitdump's path on the capture host
  uint64_t bytes_kept = 0;     // header and whole records kept (the torn record starts here)
  uint64_t bytes_lost = 0;     // bytes of the torn record (or header) the file held
  uint64_t record_size = 0;    // the torn record's total_size; 0 when not yet written
  uint64_t records_kept = 0;   // whole records kept
  uint64_t waited_ms = 0;      // how long the recorder waited for the writer to finish it
  std::string perf_map;        // the perf map that names the code; empty when there was none
  uint64_t code_count = 0;     // code the perf map names that the whole records lack
  std::vector<TornJitCode> code;  // the newest of it (at most kMaxTornJitCode), oldest first
  bool operator==(const TornJitdump&) const = default;
};

// How many TornJitCode entries a writer lists per jitdump (the rest is only counted).
inline constexpr size_t kMaxTornJitCode = 256;

// The metadata entries of `torn` as the `index`-th torn jitdump (1, 2, ...) of the capture.
std::vector<std::pair<std::string, std::string>> TornJitdumpMetadata(const TornJitdump& torn,
                                                                     unsigned index);

// Every torn jitdump the metadata describes, by index (later values of a key win; unknown fields
// are ignored). An error naming `source`, the key and its value for a value that does not parse.
Result<std::vector<TornJitdump>> ParseTornJitdumps(
    const std::vector<std::pair<std::string, std::string>>& metadata, const std::string& source);

}  // namespace ptscope::format
