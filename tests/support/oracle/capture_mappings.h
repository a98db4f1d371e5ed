// The executable file mappings of each process of a capture, read straight from its MMAP2
// sideband: what the tests' oracles (ipt_insns, call_tree_oracle) know of the code, shared with
// pt-decode only through the archive reader.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ptscope/format.h"

namespace ptscope::oracle {

struct Mapping {
  std::string path;
  uint64_t addr = 0, len = 0, pgoff = 0;
};

struct CaptureMappings {
  // Executable file mappings of each pid after all sideband: COMM(exec) starts a new address
  // space, FORK of a new process copies the parent's.
  std::map<uint32_t, std::vector<Mapping>> by_pid;
  std::map<uint32_t, uint32_t> pid_of_tid;  // every tid the sideband names
};

// Empty `*error` on success; otherwise it names the chunk or record.
CaptureMappings CollectMappings(const format::Archive& archive, std::string* error);

}  // namespace ptscope::oracle
