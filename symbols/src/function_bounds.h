// Where functions begin and end, and names, for code no symbol covers: the `.eh_frame` FDEs of a
// stripped binary (one per function compiled with unwind tables, i.e. nearly all code), and the
// PLT stubs of any ELF file. Both live in allocated sections, which a separate debug file keeps
// as NOBITS: read them from the code file.
#pragma once

#include <llvm/ADT/StringRef.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "section_cache.h"

namespace ptscope::symbols {

struct CodeRange {
  uint64_t start = 0;  // ELF vaddr
  uint64_t size = 0;
};

// The [start, start + size) of every FDE in `path`'s .eh_frame, sorted by start; empty when the
// file has no readable .eh_frame. A damaged .eh_frame yields the FDEs before the damage.
// With a `cache`, the ranges of a file with a build id are kept there ("table.fde_ranges"):
// parsing every CFI program of a libc's .eh_frame was a tenth of a small capture's decode.
// `source`, when given, is the file's size and hash (SectionCache::SourceOf), computed already.
std::vector<CodeRange> LoadFdeRanges(const std::string& path, const SectionCache* cache = nullptr,
                                     const SectionCache::Source* source = nullptr);

struct PltStub {
  uint64_t start = 0;
  uint64_t size = 16;  // .plt and .plt.sec stubs; .plt.got stubs are 8 bytes (the entry size)
  std::string name;    // "printf@plt"
};

// The PLT stubs of the code file `path`, sorted by start, named as objdump names them: the
// symbol of the stub's GOT slot relocation (JUMP_SLOT, GLOB_DAT) + "@plt"; a stub whose slot is
// an IRELATIVE relocation (libc calling its own IFUNCs, e.g. strlen) after the IFUNC symbol at
// the relocation's addend (looked up in `path` and in `debug_path`, which may be the same file),
// else "*ABS*+0x9f1c0@plt"; the lazy-binding header PLT0 ".plt". Stubs are found by LLVM's
// MCInstrAnalysis::findPltEntries.
std::vector<PltStub> LoadPltStubs(const std::string& path, const std::string& debug_path);

// The same, kept in `cache` between runs: disassembling a libc's PLT and looking up its IFUNC
// names was a tenth of a small capture's decode once its DWARF answers were kept. The file is
// "table.plt_stubs" under the code file's `build_id`; its header holds the code file's size and
// hash (`code`), and its payload — little-endian uint64s: version (1), the debug file's size and
// hash (`debug`: IFUNC names come from it), the stub count, then per stub its start, size and
// name (byte length + bytes) — is used only when it parses exactly and names the same debug
// file; otherwise the stubs are read again and the file replaced.
std::vector<PltStub> LoadPltStubs(const std::string& path, const std::string& debug_path,
                                  const SectionCache* cache, const std::string& build_id,
                                  SectionCache::Source code, SectionCache::Source debug);
// The payload above, and its reader (nullopt: not a whole, valid payload for `debug`).
std::string PackPltStubs(const std::vector<PltStub>& stubs, SectionCache::Source debug);
std::optional<std::vector<PltStub>> UnpackPltStubs(llvm::StringRef bytes,
                                                   SectionCache::Source debug);

}  // namespace ptscope::symbols
