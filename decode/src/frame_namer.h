// FrameNamer over the symbols library: address -> mapping (time-versioned) -> module files ->
// LLVM symbolizer. Code without symbols is "module+0xoffset", code outside every module
// "0xaddress". Thread-safe (a mutex), cached per (pid, address).
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "events.h"
#include "jit_code_store.h"
#include "ptscope/symbols.h"

namespace ptscope::decode {

class SymbolsFrameNamer : public FrameNamer {
 public:
  SymbolsFrameNamer(const symbols::AddressSpace& address_space,
                    symbols::ModuleResolver& resolver, symbols::Symbolizer& symbolizer)
      : address_space_(address_space), resolver_(resolver), symbolizer_(symbolizer) {}

  FrameName Name(uint32_t pid, uint64_t address, uint64_t time_ns) override;
  uint64_t FunctionStart(uint32_t pid, uint64_t address, uint64_t time_ns) override;
  // Whether `address` lies in a module with a symbol table or debug info (for the summary).
  bool InSymbolizedModule(uint32_t pid, uint64_t address, uint64_t time_ns);
  // Names JIT code (jitdump, then perf map) outside file-backed mappings.
  void SetJitCode(const symbols::JitCodeStore* jit) { jit_ = jit; }
  // One summary note per module whose code ran without symbols (named module+offset), saying
  // where --symbols would find its debug file.
  std::vector<std::string> UnsymbolizedNotes();

 private:
  struct Location {
    const symbols::Mapping* mapping = nullptr;
    std::string debug_path;       // empty when the module's files were not found
    std::string code_path;
    uint64_t vaddr = 0;           // ELF vaddr of `address` in the module files
    bool has_vaddr = false;
  };
  std::optional<symbols::JitName> JitName(uint32_t pid, uint64_t address, uint64_t time_ns) const;
  Location Locate(uint32_t pid, uint64_t address, uint64_t time_ns);
  const symbols::Mapping* FindMapping(uint32_t pid, uint64_t address, uint64_t time_ns) const;

  const symbols::AddressSpace& address_space_;
  symbols::ModuleResolver& resolver_;
  symbols::Symbolizer& symbolizer_;
  std::mutex mutex_;
  std::map<std::pair<uint32_t, uint64_t>, FrameName> names_;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> starts_;
  std::map<uint32_t, bool> module_symbolized_;
  const symbols::JitCodeStore* jit_ = nullptr;
  std::set<uint32_t> found_without_symbols_;  // modules whose files were found, symbols not
};

}  // namespace ptscope::decode
