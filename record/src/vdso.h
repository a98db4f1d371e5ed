// The vdso has no file on disk: decoders need the exact bytes the traced process executed, so
// the recorders copy them out of the live process at capture time.
#pragma once

#include <cstdint>
#include <vector>

#include "proc_maps.h"
#include "ptscope/result.h"

namespace ptscope::record {

struct VdsoImage {
  uint64_t vaddr = 0;          // where it is mapped in the process
  std::vector<uint8_t> bytes;  // the whole [vdso] mapping
};

// Reads `size` bytes at `address` of process `pid` (0 = self) through /proc/PID/mem. Needs the
// same permission as ptrace attach (root, CAP_SYS_PTRACE, or a child under ptrace_scope <= 1).
Result<std::vector<uint8_t>> ReadProcessMemory(int pid, uint64_t address, uint64_t size);

// Copies the process's [vdso] mapping found in `maps` (kNotFound when there is none).
Result<VdsoImage> ReadVdso(int pid, const std::vector<MapEntry>& maps);

}  // namespace ptscope::record
