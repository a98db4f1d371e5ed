// What the sideband of a capture says about files: the mapped ELF files (the archive's Module
// chunks), the vdso address, the JIT dumps a runtime mapped and the processes seen. Fed with every
// sideband record a recorder writes, whether built or read from the kernel.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "perf_sideband.h"
#include "ptscope/format.h"
#include "ptscope/result.h"
#include "ptscope/torn_jitdump.h"

namespace ptscope::record {

class ModuleCollector {
 public:
  // Parses records in SidebandLayout; a malformed record ends the scan of that batch and is
  // counted, never fatal.
  void Scan(std::span<const uint8_t> records);
  // Files named by an MMAP/MMAP2 record since the last call, in order of first appearance, with
  // the build id the record carried (empty when it had none).
  std::vector<std::pair<std::string, std::vector<uint8_t>>> TakeNewFiles();
  // Every file seen, with the build id from the records when one carried it.
  const std::map<std::string, std::vector<uint8_t>>& files() const { return files_; }
  // Where [vdso] was mapped in process `pid` (first seen), if a record said so.
  std::optional<uint64_t> VdsoAddress(uint32_t pid) const;
  uint64_t malformed_records() const { return malformed_; }
  // jit-PID.dump files mapped by process PID (the runtime's executable marker mapping), by pid.
  const std::map<uint32_t, std::set<std::string>>& jitdumps() const { return jitdumps_; }
  // Every process that a record named (owner candidates of /tmp/perf-PID.map).
  const std::set<uint32_t>& pids() const { return pids_; }

 private:
  std::map<uint32_t, std::set<std::string>> jitdumps_;
  std::set<uint32_t> pids_;
  std::map<std::string, std::vector<uint8_t>> files_;  // path → build id (may be empty)
  std::vector<std::string> new_files_;
  std::map<uint32_t, uint64_t> vdso_by_pid_;
  uint64_t malformed_ = 0;
};

// The Module chunk of `path`: `build_id` when known, else read from the file; size and mtime
// from stat.
format::ModuleChunk DescribeModule(const std::string& path, const std::vector<uint8_t>& build_id,
                                   BuildIdCache* build_ids);

// How long CaptureJitFiles waits for a runtime to finish the jitdump record it is writing.
struct JitTailWait {
  std::chrono::milliseconds poll{10};
  std::chrono::milliseconds limit{200};
};

// JIT code descriptions the capture's processes wrote, read completely when the capture ends
// (after the target is stopped or detached; both files are append-only, so the last read holds
// every version): each mapped jitdump (kJitdump) and each /tmp/perf-PID.map (kPerfMap), pid and
// original path set. Files are opened without following symlinks and must be regular files owned
// by us or by the process (perf's rule), since /tmp names can be planted by others.
// A jitdump whose last record runs past its end (the runtime was writing it, or V8's 2 MB stdio
// buffer holds the rest) is read again every `wait.poll` up to `wait.limit`; still torn, its
// whole records are kept and a warning names the file, offset, byte counts and the code left
// without bytes, by its perf-map names; `torn`, when given, receives the same facts for the
// archive's metadata (jit.torn.<n>.*). Problems become `warnings`.
std::vector<format::BlobChunk> CaptureJitFiles(const ModuleCollector& modules,
                                               std::vector<std::string>* warnings,
                                               std::vector<format::TornJitdump>* torn = nullptr);
std::vector<format::BlobChunk> CaptureJitFiles(
    const std::map<uint32_t, std::set<std::string>>& jitdumps, const std::set<uint32_t>& pids,
    std::vector<std::string>* warnings, const JitTailWait& wait,
    std::vector<format::TornJitdump>* torn = nullptr);

// The bytes of a module for --embed-binaries (BlobChunk kind kElf).
Result<format::BlobChunk> EmbedModule(const format::ModuleChunk& module);

}  // namespace ptscope::record
