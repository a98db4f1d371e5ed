// FrameNamer over the symbols library: address -> mapping (time-versioned) -> module files ->
// LLVM symbolizer. Code without symbols is "module+0xoffset", code outside every module
// "0xaddress". Thread-safe (a mutex), cached per (pid, address) in flat hash maps: the flow
// decoder asks about every instruction of each new block.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "events.h"
#include "ptscope/symbols.h"
#include "flat_map.h"

namespace ptscope::decode {

// Both the CodeFacts of the decode stages and the FrameNamer of the sinks: one object, so that an
// address is located and symbolized once for both (the stages see only CodeFacts).
class SymbolsFrameNamer : public CodeFacts, public FrameNamer {
 public:
  SymbolsFrameNamer(const symbols::AddressSpace& address_space,
                    symbols::ModuleResolver& resolver, symbols::Symbolizer& symbolizer)
      : address_space_(address_space), resolver_(resolver), symbolizer_(symbolizer) {}

  FrameName Name(uint32_t pid, uint64_t address, uint64_t time_ns) override;
  uint64_t FunctionStart(uint32_t pid, uint64_t address, uint64_t time_ns) override;
  std::pair<uint64_t, uint64_t> FunctionRange(uint32_t pid, uint64_t address,
                                              uint64_t time_ns) override;
  uint32_t InlineDepth(uint32_t pid, uint64_t address, uint64_t time_ns) override;
  InlineDepthStretch InlineStretch(uint32_t pid, uint64_t address, uint64_t time_ns) override;
  // A stretch of named or unnamed functions (symbols::NamedStretch) within its mapping, or the
  // address alone in JIT memory.
  bool InNamedCode(uint32_t pid, uint64_t address, uint64_t time_ns, uint64_t* start,
                   uint64_t* end) override;
  // The e_entry of the code file mapped at `address` (not of JIT code or the vDSO).
  bool IsProgramEntry(uint32_t pid, uint64_t address, uint64_t time_ns) override;
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
    const symbols::ElfInfo* code_elf = nullptr;  // the code file's ELF facts (not for [vdso])
  };
  std::optional<symbols::JitName> JitName(uint32_t pid, uint64_t address, uint64_t time_ns) const;
  bool IsFileBacked(const symbols::Mapping* mapping) const;
  // Unnamed code of `module` ran: note the module when it has no symbols at all.
  void NoteUnnamedCode(uint32_t module, const std::string& debug_path);
  Location Locate(uint32_t pid, uint64_t address, uint64_t time_ns);
  // ModuleResolver::Resolve of a module, asked once: each answer builds its key from the path and
  // the build id in hex, and the summary's symbolized count asks on every change of stretch.
  const symbols::ModuleFiles& FilesOf(uint32_t module);
  const symbols::Mapping* FindMapping(uint32_t pid, uint64_t address, uint64_t time_ns) const;

  const symbols::AddressSpace& address_space_;
  symbols::ModuleResolver& resolver_;
  symbols::Symbolizer& symbolizer_;
  std::mutex mutex_;
  struct PidAddress {
    uint32_t pid = 0;
    uint64_t address = 0;
    bool operator==(const PidAddress&) const = default;
  };
  struct PidAddressHash {
    uint64_t operator()(const PidAddress& k) const {
      return (k.address ^ (uint64_t{k.pid} << 47)) * 0x9e3779b97f4a7c15ull;
    }
  };
  // Finds or computes the name (under the lock).
  const FrameName& NameLocked(uint32_t pid, uint64_t address, uint64_t time_ns);
  FlatMap<PidAddress, uint32_t, PidAddressHash> name_index_;  // -> names_ index + 1
  std::vector<std::unique_ptr<FrameName>> names_;             // stable: returned by reference
  FlatMap<PidAddress, uint64_t, PidAddressHash> starts_;       // entry + 1 (0: not asked yet)
  std::map<uint32_t, bool> module_has_symbols_;  // .symtab or DWARF in its debug file
  std::set<uint32_t> code_files_told_;          // modules whose code file the symbolizer knows
  std::vector<const symbols::ModuleFiles*> module_files_;  // by module; resolver-owned (stable)
  const symbols::JitCodeStore* jit_ = nullptr;
  std::set<uint32_t> found_without_symbols_;  // modules whose files were found, symbols not
};

}  // namespace ptscope::decode
