// MiniDebugInfo (formats.md §5): distro binaries (Fedora, ...) are stripped but carry
// `.gnu_debugdata`, an xz-compressed ELF holding only a .symtab. LLVMSymbolizer does not read it,
// so it is decompressed here with liblzma and symbolized through LLVMSymbolizer's
// symbolizeCode(const ObjectFile&, ...) overload: function names (and starts), no lines.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::symbols {

// The decompressed `.gnu_debugdata` of the ELF file at `path`. kNotFound when it has none;
// kCorrupt when the section is not a valid xz stream (or inflates beyond 256 MiB).
Result<std::vector<uint8_t>> ReadMiniDebugInfo(const std::string& path);

struct MiniSymbol {
  bool found = false;
  std::string function;         // demangled
  uint64_t function_start = 0;  // ELF vaddr, 0 when unknown
};

// Thread-safe; each module's section is decompressed once.
class MiniDebugInfoSymbolizer {
 public:
  MiniDebugInfoSymbolizer();
  ~MiniDebugInfoSymbolizer();
  // Whether `path` has usable MiniDebugInfo (decompresses it on first use).
  bool Has(const std::string& path);
  MiniSymbol Symbolize(const std::string& path, uint64_t vaddr);
  // Its function symbols as (start, size), sorted; empty without MiniDebugInfo.
  std::vector<std::pair<uint64_t, uint64_t>> Functions(const std::string& path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptscope::symbols
