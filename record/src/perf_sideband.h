// Sideband for a capture: the dummy software event that makes the kernel write MMAP2 (with build
// ids), COMM, FORK/EXIT and context-switch records, records synthesized from /proc for what
// existed before the events were opened, and perf's TSC <-> perf-time conversion. Works without
// Intel PT (pt-record --sideband-only on any host).
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proc_maps.h"
#include "ptscope/perf_records.h"
#include "ptscope/result.h"
#include "sideband_layout.h"

namespace ptscope::record {


struct SidebandAttrOptions {
  bool inherit = true;         // follow threads and children created later (needs cpu >= 0)
  bool context_switch = true;
  bool build_id = true;        // MMAP2 carries build ids (Linux 5.12+)
  bool kernel = false;         // also kernel-side records (ksymbol, ...): only with --kernel
  bool enable_on_exec = false;
};
// PERF_COUNT_SW_DUMMY with mmap2, build_id, comm, comm_exec, task, context_switch, sample_id_all.
perf_event_attr BuildSidebandAttr(const SidebandAttrOptions& options);

// perf time (ns) from the TSC, with the mmap page's conversion (perf's overflow-safe form).
struct PerfClock {
  bool cap_user_time_zero = false;
  uint16_t time_shift = 0;
  uint32_t time_mult = 0;
  uint64_t time_zero = 0;
  uint64_t TscToPerfTime(uint64_t tsc) const;
  std::vector<std::pair<std::string, std::string>> Metadata() const;  // time.* keys
};
PerfClock ReadPerfClock(const perf_event_mmap_page& page);

// Build ids of mapped files, read once per path. Deleted files are read through
// /proc/PID/map_files when possible.
class BuildIdCache {
 public:
  // Empty when the file is not ELF or cannot be read (the record then carries the inode form).
  const std::vector<uint8_t>& Get(const std::string& path, int pid, const MapEntry* mapping);

 private:
  std::map<std::string, std::vector<uint8_t>> ids_;
};

struct SynthesisContext {
  uint64_t time = 0;           // sample_id.time of the synthesized records
  uint32_t cpu = 0;
  uint64_t id = 0;             // sample_id.identifier (one of the SidebandAttrChunk ids)
  bool comm_exec = false;      // mark COMM as COMM_EXEC (run mode: we stopped it at exec)
  std::vector<uint8_t> vdso_build_id;
};

// COMM for every thread and MMAP2 for every executable mapping (and [vdso]) of `pid`, as the
// kernel would have written them; appended to *out as raw records.
Status SynthesizeProcess(int pid, const SynthesisContext& context, BuildIdCache* build_ids,
                         std::vector<uint8_t>* out);

// The comm (thread name) of a thread from /proc/PID/task/TID/comm.
Result<std::string> ReadComm(int pid, int tid);

}  // namespace ptscope::record
