// Symbols: ELF facts, finding a module's files by build id, time-versioned process address
// spaces, and a symbolizer facade over LLVM. Used by pt-decode to give code bytes to libipt and
// names to slices. Nothing here prints; failures are values or per-module notes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ptscope/format.h"
#include "ptscope/result.h"

namespace ptscope::symbols {

class DebuginfodFetcher;  // debuginfod_fetcher.h

// ---------------------------------------------------------------------------------------------
// ELF facts

struct LoadSegment {
  uint64_t vaddr = 0;
  uint64_t memsz = 0;
  uint64_t offset = 0;  // file offset
  uint64_t filesz = 0;
  bool executable = false;
};

struct ElfInfo {
  std::vector<uint8_t> build_id;       // empty when the file has no NT_GNU_BUILD_ID note
  std::vector<LoadSegment> segments;   // PT_LOAD, in file order
  bool has_symtab = false;             // .symtab present (not stripped)
  bool has_debug_info = false;         // .debug_info present
  bool code_is_nobits = false;         // .text is SHT_NOBITS: a separate debug file
  std::string debuglink;               // .gnu_debuglink file name, empty when absent
  uint32_t debuglink_crc = 0;          // its CRC-32 of the debug file (valid with debuglink)
};

// Reads the ELF facts of `path`. kBadMagic when it is not a 64-bit little-endian ELF.
Result<ElfInfo> ReadElfInfo(const std::string& path);

// CRC-32 (zlib's, as .gnu_debuglink uses) of the whole file; kIo when unreadable.
Result<uint32_t> FileCrc32(const std::string& path);

// ELF virtual address of the byte at `file_offset`, through the PT_LOAD that maps it.
std::optional<uint64_t> FileOffsetToVaddr(const ElfInfo& elf, uint64_t file_offset);

// ---------------------------------------------------------------------------------------------
// Finding a module's files

// Where a module's code bytes and debug info live (they may be different files).
struct ModuleFiles {
  std::string code_path;   // bytes libipt reads; empty when not found
  std::string debug_path;  // file with symbols/DWARF for the symbolizer; may equal code_path
  ElfInfo code_elf;        // facts of code_path (valid when code_path is set)
  std::string code_origin; // "archive", "recorded path", "--symbols DIR", "--symbols", "debuginfod"
  // Where debug_path came from: "archive", "--symbols DIR" (its .build-id tree),
  // "/usr/lib/debug", "--symbols" (found by build id below a --symbols directory),
  // ".gnu_debuglink", "debuginfod", or "code file" (debug_path is the code file itself).
  std::string debug_origin;
  // The DWARF package LLVM reads beside debug_path (see AttachDwp), empty when none.
  std::string dwp_path;
};

// Finds files by build id: an embedded archive copy, then the recorded path (only if its build
// id matches), then each --symbols directory (".build-id/xx/rest[.debug]" layout, then every ELF
// file below it indexed by its own build id), then /usr/lib/debug for debug info, then the
// binary's .gnu_debuglink (beside it, in .debug/, under /usr/lib/debug/<dir>, in --symbols;
// CRC-32 checked, a stale file is refused with a note). A file whose
// build id differs from the capture's is never used; the refusal is kept as a note.
// Split DWARF: a DWARF package found as "<recorded path>.dwp", "<code file>.dwp" or by that name
// in a --symbols directory is presented to LLVM as "<debug_path>.dwp" (see AttachDwp).
class ModuleResolver {
 public:
  // Blobs are written under a private temp dir (removed by the destructor).
  ModuleResolver(std::vector<std::string> symbol_dirs);
  ~ModuleResolver();
  ModuleResolver(const ModuleResolver&) = delete;
  ModuleResolver& operator=(const ModuleResolver&) = delete;

  // Makes an embedded kElf / kDebugInfo / kVdso blob available (kVdso under `vdso_key`).
  Status AddBlob(const format::BlobChunk& blob);
  // Resolves (and caches) a module. An empty build id accepts the recorded path as it is.
  const ModuleFiles& Resolve(const std::string& recorded_path, const std::vector<uint8_t>& build_id);
  // Asks `fetcher` (when enabled) last, for code and for debug info; it must outlive this.
  void SetDebuginfod(DebuginfodFetcher* fetcher) { debuginfod_ = fetcher; }
  // Path of the extracted vdso of `pid` (or of any process when none matches), empty if none.
  std::string VdsoPath(uint32_t pid) const;
  // Human notes: rebuilt binaries refused, unreadable files. Each note once.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  struct Candidate {
    std::string path;
    ElfInfo elf;
  };
  void ScanSymbolDirs();
  std::optional<Candidate> Probe(const std::string& path, const std::vector<uint8_t>& build_id,
                                 bool report_mismatch);
  std::string FindDebugFile(const Candidate& code, const std::vector<uint8_t>& build_id,
                            const std::string& recorded_path, std::string& origin);
  std::string WriteTemp(const std::string& name, const std::vector<uint8_t>& data);
  std::string FindDebuglinkFile(const Candidate& code, const std::vector<uint8_t>& build_id,
                                const std::string& recorded_path);
  bool EnsureTempDir();
  std::string AttachDwp(const std::string& debug_path, const std::string& hex,
                        const std::string& recorded_path, const std::string& code_path,
                        std::string& dwp_path);
  void Note(std::string note);

  std::vector<std::string> symbol_dirs_;
  std::string temp_dir_;
  std::map<std::string, std::string> embedded_code_;   // hex build id -> temp path
  std::map<std::string, std::string> embedded_debug_;  // hex build id -> temp path
  std::map<uint32_t, std::string> vdso_by_pid_;
  bool scanned_ = false;
  std::multimap<std::string, std::string> scanned_files_;  // hex build id -> path
  std::map<std::string, std::string> scanned_dwp_;         // "name.dwp" -> first path found
  std::map<std::string, ModuleFiles> cache_;               // path + '\0' + hex build id
  std::vector<std::string> notes_;
  DebuginfodFetcher* debuginfod_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Address spaces over time
//
// Each process has a list of mappings, each valid over [valid_from, valid_until):
//
//   time ──────────────────────────────────────────────────────────────────────►
//   pid 10  a.out   [0x400000,0x401000)  ├────────────────────────┤ exec clears
//           libc    [0x7f00..)                ├───────────────────┤
//           dlopen  libx.so                          ├────────────┤
//   pid 11  (FORK of 10 at t1: copies every mapping live at t1)  ├──────────►
//
// A new mapping ends (and splits) the parts of older mappings it overlaps at that time.
struct Module {
  std::string path;
  std::vector<uint8_t> build_id;
};

struct Mapping {
  uint64_t start = 0, end = 0;  // [start, end)
  uint64_t pgoff = 0;           // file offset of `start`
  uint32_t module = 0;          // index into AddressSpace::modules()
  uint64_t valid_from = 0, valid_until = UINT64_MAX;
};

class AddressSpace {
 public:
  uint32_t InternModule(const std::string& path, const std::vector<uint8_t>& build_id);
  void Map(uint32_t pid, uint64_t time_ns, uint64_t start, uint64_t len, uint64_t pgoff,
           uint32_t module);
  void Exec(uint32_t pid, uint64_t time_ns);
  void Fork(uint32_t parent_pid, uint32_t child_pid, uint64_t time_ns);
  // The mapping holding `address` in `pid` at `time_ns`, or nullptr.
  const Mapping* Lookup(uint32_t pid, uint64_t address, uint64_t time_ns) const;
  // Every mapping of `pid` (all times), in the order they were added.
  const std::vector<Mapping>& MappingsOf(uint32_t pid) const;
  const std::vector<Module>& modules() const { return modules_; }

 private:
  std::unordered_map<uint32_t, std::vector<Mapping>> by_pid_;
  std::vector<Module> modules_;
  std::map<std::pair<std::string, std::vector<uint8_t>>, uint32_t> module_index_;
};

// ---------------------------------------------------------------------------------------------
// Symbolizer

struct SourceFrame {
  std::string function;  // demangled
  std::string file;
  uint32_t line = 0;
};

struct Symbol {
  bool found = false;
  std::string function;           // demangled name of the (outermost) function
  uint64_t function_start = 0;    // ELF vaddr of its entry, 0 when unknown
  std::string file;
  uint32_t line = 0;
  std::vector<SourceFrame> inlined;  // inlined frames at the address, outermost first
};

// Inlined-call depths over a stretch of code: for every vaddr a in [begin, end),
// Symbolizer::Symbolize(path, a).inlined.size() equals DepthAt(a), the depth of the last step at
// or before a.
struct InlineDepthSpan {
  struct Step {
    uint64_t vaddr = 0;
    uint32_t depth = 0;
  };
  uint64_t begin = 0, end = 0;
  std::vector<Step> steps;  // sorted by vaddr, steps.front().vaddr == begin
  uint32_t DepthAt(uint64_t vaddr) const;
};

// Thread-safe facade over llvm::symbolize::LLVMSymbolizer plus a per-module sorted function
// table (for fast function starts). Addresses are ELF vaddrs of the debug file.
class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbol Symbolize(const std::string& debug_path, uint64_t vaddr);
  // The inlined depths of the function (or stretch without debug info) around `vaddr`, computed
  // once per function from the DWARF tree; nullptr where only Symbolize can tell (split DWARF,
  // debug info LLVM would read from another file): ask per address then.
  std::shared_ptr<const InlineDepthSpan> InlineDepths(const std::string& debug_path, uint64_t vaddr);
  // Entry of the function containing `vaddr` from the symbol table, 0 when unknown.
  uint64_t FunctionStart(const std::string& debug_path, uint64_t vaddr);
  // Modules that failed to load (each once): "PATH: reason".
  std::vector<std::string> failures() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptscope::symbols
