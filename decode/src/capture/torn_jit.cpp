#include "capture/torn_jit.h"

#include <cstdio>

#include "ptscope/format.h"
#include "ptscope/torn_jitdump.h"

namespace ptscope::decode {
namespace {

using ::ptscope::format::HexAddress;

}  // namespace

std::vector<std::string> TornJitNotes(const format::Archive& archive,
                                      const std::vector<uint64_t>& missing_code_ips) {
  std::vector<std::string> notes;
  Result<std::vector<format::TornJitdump>> torn =
      format::ParseTornJitdumps(archive.metadata, archive.path);
  if (!torn) return {"cannot say which JIT code a torn jitdump left without bytes: " +
                     torn.error().message};
  for (const format::TornJitdump& t : *torn) {
    std::string ran;  // the listed code the decode met without bytes, oldest first
    for (const format::TornJitCode& code : t.code) {
      for (uint64_t ip : missing_code_ips) {
        if (ip < code.address || ip - code.address >= code.size) continue;
        ran += (ran.empty() ? "" : ", ") + code.name + " at " + HexAddress(code.address);
        break;
      }
    }
    if (ran.empty()) continue;  // its tail made none of this decode's gaps
    std::string where = t.bytes_kept == 0 ? "inside its header"
                                          : "mid-record at offset " + std::to_string(t.bytes_kept);
    notes.push_back("JIT code without bytes: jitdump " + t.jitdump + " ended " + where +
                    " when the capture stopped; named from " + t.perf_map + ": " + ran);
  }
  return notes;
}

}  // namespace ptscope::decode
