// Reader for perf's jitdump files (formats.md §4): code bytes, names, line tables and moves of
// JIT-compiled code, with timestamps. It takes untrusted bytes: every field is read bounds-checked; damage after a good prefix
// keeps the prefix and says where it stopped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ptscope/result.h"
#include "ptscope/symbols.h"  // JitLineEntry

namespace ptscope::symbols {


// One LOAD or MOVE, in file order. For a MOVE, `code` is empty and `old_code_addr` is set.
struct JitCodeRecord {
  enum class Kind { kLoad, kMove };
  Kind kind = Kind::kLoad;
  uint64_t timestamp = 0;     // raw: CLOCK_MONOTONIC ns, or TSC with JitDump::arch_timestamp
  uint32_t pid = 0, tid = 0;
  uint64_t vma = 0;
  uint64_t code_addr = 0;     // for a MOVE: the new address
  uint64_t old_code_addr = 0; // MOVE only
  uint64_t code_size = 0;
  uint64_t code_index = 0;
  std::string name;           // LOAD only
  std::vector<uint8_t> code;  // LOAD only: code_size bytes of native code
  std::vector<JitLineEntry> lines;  // from the DEBUG_INFO record that preceded the LOAD
};

struct JitDump {
  uint32_t version = 0;
  uint32_t elf_mach = 0;
  uint32_t pid = 0;
  uint64_t timestamp = 0;
  uint64_t flags = 0;
  bool arch_timestamp = false;  // flags bit 0: timestamps are TSC, not CLOCK_MONOTONIC
  bool byte_swapped = false;    // written on a host of the other byte order
  bool closed = false;          // a JIT_CODE_CLOSE record was seen
  std::vector<JitCodeRecord> records;
  uint64_t skipped_records = 0;  // UNWINDING_INFO and unknown ids
  std::string damage;           // non-empty: reading stopped early (names the offset)
};

constexpr uint32_t kJitdumpMagic = 0x4A695444;  // "JiTD"
constexpr uint64_t kJitdumpArchTimestamp = 1;

// Parses a whole jitdump file. Fails only when the header is unusable (bad magic, truncated,
// unsupported version); record-level damage ends the parse and is described in `damage`.
Result<JitDump> ParseJitdump(const uint8_t* data, size_t size, const std::string& source);

}  // namespace ptscope::symbols
