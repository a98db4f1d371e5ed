// Opening a capture, whatever wrote it, and walking its sideband: the one place the tools read
// captures through (pt-decode, pt-archive, the bench loop, the tests' oracles).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ptscope/format.h"
#include "ptscope/perf_records.h"
#include "ptscope/result.h"

namespace ptscope::format {

// Whether `path` starts with perf.data's magic ("PERFILE2").
bool IsPerfData(const std::string& path);

// A .ptar archive (ReadArchive) or a Linux perf.data with Intel PT (ImportPerfData), told apart
// by the file's magic. Errors name the file.
Result<Archive> OpenCapture(const std::string& path, const ReadOptions& options = {});

// A sideband chunk that could not be walked to its end.
struct SidebandProblem {
  size_t chunk = 0;        // index in Archive::sideband
  uint32_t attr_id = 0;
  bool missing_attr = false;  // no SidebandAttr chunk describes attr_id: the chunk is skipped
  uint64_t offset = 0;     // else: the malformed record's offset in the chunk (the rest is skipped)
  std::string error;       // and what is wrong with it
  // Records not kept (ReadOptions::keep_sideband_bytes): how many chunks, from `chunk` on, could
  // not be read again (the file changed or went away since): all of their records are missing.
  size_t unread = 0;
  // "sideband chunk N offset O: ERROR", or "... names attr A but no SidebandAttr chunk describes it".
  std::string Describe() const;
};

// Every sideband record of `archive`, chunk by chunk in file order (each chunk's records as
// written), parsed with its chunk's SidebandAttr layout. A chunk without its attr, or the rest of
// a chunk from a malformed record on, is left out and reported; the walk goes on with the next
// chunk, so a caller may note the problems (pt-decode) or refuse the capture (the oracles).
std::vector<SidebandProblem> ForEachSidebandRecord(
    const Archive& archive, const std::function<void(perf::Record&& record)>& visit);
// The same over the chunks [first, end) of Archive::sideband only, telling each record's chunk.
std::vector<SidebandProblem> ForEachSidebandRecordIn(
    const Archive& archive, size_t first, size_t end,
    const std::function<void(size_t chunk, perf::Record&& record)>& visit);

}  // namespace ptscope::format
