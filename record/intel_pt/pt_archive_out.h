// What pt-record writes besides PT bytes: host and capture metadata, the module list derived from
// the MMAP2 sideband, embedded binaries, and the vdso blob.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "host_info.h"
#include "perf_sideband.h"
#include "ptscope/format.h"

namespace ptscope::record {

using MetadataEntries = std::vector<std::pair<std::string, std::string>>;

// tool, host.name, kernel.release, cpu.*, pt.max_nonturbo_ratio, pt.cpuid15_*, pt.caps.*.
MetadataEntries HostMetadata(const HostFacts& facts, const std::string& tool_version);

// Collects the files (and the vdso address) that the MMAP2 records of a capture name.
class ModuleCollector {
 public:
  // Parses raw sideband records (SidebandLayout); malformed records end the scan of that chunk
  // and are counted, never fatal.
  void Scan(const std::vector<uint8_t>& records);
  // One ModuleChunk per distinct path (build id from the records, else read from the file).
  std::vector<format::ModuleChunk> Modules(BuildIdCache* build_ids) const;
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
  std::map<uint32_t, uint64_t> vdso_by_pid_;
  uint64_t malformed_ = 0;
};

// JIT code descriptions the capture's processes wrote, read completely when the capture ends
// (both files are append-only, so the last read holds every version): each mapped jitdump
// (kJitdump) and each /tmp/perf-PID.map (kPerfMap), pid and original path set. Files are opened
// without following symlinks and must be regular files owned by us or by the process (perf's
// rule), since /tmp names can be planted by others. Problems become `warnings`.
std::vector<format::BlobChunk> CaptureJitFiles(const ModuleCollector& modules,
                                               std::vector<std::string>* warnings);

// The bytes of a module for --embed-binaries (BlobChunk kind kElf).
Result<format::BlobChunk> EmbedModule(const format::ModuleChunk& module);

}  // namespace ptscope::record
