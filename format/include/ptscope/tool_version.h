// What every ptscope tool prints for --version: the release it was built from and its own ELF
// build id, the id pt-decode and debuginfod resolve the tool's debug info by (issue 27).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptscope::format {

// The ptscope release (meson's project version), e.g. "0.1.0".
const char* PtscopeVersion();

// The running executable's NT_GNU_BUILD_ID note, read from its loaded program headers (so a
// stripped or static binary has it too); empty when it was linked without one.
std::vector<uint8_t> OwnBuildId();

// "TOOL VERSION (build id HEX)", or "TOOL VERSION (no build id)".
std::string VersionLine(const std::string& tool);

}  // namespace ptscope::format
