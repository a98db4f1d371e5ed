// Why JIT code has no bytes: the jitdumps the recorder found torn at the capture's end (metadata
// jit.torn.<n>.*, FORMAT.md), matched with the addresses where the decode met missing code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ptscope/format.h"

namespace ptscope::decode {

// One note per torn jitdump whose listed code holds one of `missing_code_ips`: which jitdump
// ended where, and the perf-map names of the code that ran without bytes. A note naming the key
// when the metadata does not parse.
std::vector<std::string> TornJitNotes(const format::Archive& archive,
                                      const std::vector<uint64_t>& missing_code_ips);

}  // namespace ptscope::decode
