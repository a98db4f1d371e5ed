// Where functions begin and end, and names, for code no symbol covers: the `.eh_frame` FDEs of a
// stripped binary (one per function compiled with unwind tables, i.e. nearly all code), and the
// PLT stubs of any ELF file. Both live in allocated sections, which a separate debug file keeps
// as NOBITS: read them from the code file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptscope::symbols {

class SectionCache;

struct CodeRange {
  uint64_t start = 0;  // ELF vaddr
  uint64_t size = 0;
};

// The [start, start + size) of every FDE in `path`'s .eh_frame, sorted by start; empty when the
// file has no readable .eh_frame. A damaged .eh_frame yields the FDEs before the damage.
// With a `cache`, the ranges of a file with a build id are kept there ("table.fde_ranges"):
// parsing every CFI program of a libc's .eh_frame was a tenth of a small capture's decode.
std::vector<CodeRange> LoadFdeRanges(const std::string& path, const SectionCache* cache = nullptr);

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

}  // namespace ptscope::symbols
