// The statically known code of one ELF file, as pt-synth needs it: executable ranges (to decode),
// the executable PT_LOAD segments (to describe in MMAP2 sideband), function entries (where walks
// start and where indirect branches land) and the GNU build id, read through pt-record's
// bounds-checked ELF reader (record/src/elf_file.h); the file's bytes are kept for CodeAt.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::synth {

// Where a position-independent executable is loaded (the usual x86-64 Linux base without ASLR).
inline constexpr uint64_t kPieBase = 0x555555554000;

struct ExecSegment {  // an executable PT_LOAD
  uint64_t vaddr = 0, offset = 0, filesz = 0, memsz = 0;
};

struct CodeRange {  // file-backed executable bytes at run-time addresses [start, start + size)
  uint64_t start = 0;
  uint64_t file_offset = 0;
  uint64_t size = 0;
};

struct ElfCode {
  std::string path;                    // absolute
  std::vector<uint8_t> bytes;          // the whole file
  bool pie = false;                    // ET_DYN: loaded at kPieBase
  uint64_t load_base = 0;              // added to every p_vaddr / symbol value
  uint64_t entry = 0;                  // run-time address of e_entry
  std::vector<ExecSegment> segments;   // link-time addresses
  std::vector<CodeRange> code;         // run-time addresses, sorted
  std::vector<uint64_t> function_entries;  // run-time addresses of STT_FUNC symbols (+ e_entry)
  std::vector<uint8_t> build_id;       // empty when the file has none
  int64_t mtime_ns = 0;

  // The code bytes at run-time address `ip` and how many follow inside the same range.
  const uint8_t* CodeAt(uint64_t ip, uint64_t* available) const;
};

// Reads an x86-64 ELF executable or shared object. Errors name the file and the field.
Result<ElfCode> LoadElfCode(const std::string& path);

}  // namespace ptscope::synth
