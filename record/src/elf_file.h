// A small bounds-checked ELF64 little-endian reader: file type, entry, PT_LOAD segments, section
// headers, GNU build id, and symbols. No libelf, no LLVM: it links into the static pt-record, and
// pt-synth reads the code it walks through it (symbols/ reads DWARF and names with LLVM).
// Works on a file (read with pread on demand, so large binaries are not loaded whole) or on bytes
// in memory (the vdso image, tests).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::record {

enum class ElfType : uint16_t { kNone = 0, kRel = 1, kExec = 2, kDyn = 3, kCore = 4 };

inline constexpr uint32_t kPtLoad = 1;
inline constexpr uint32_t kPtNote = 4;
inline constexpr uint32_t kPfX = 1;
inline constexpr uint32_t kPfW = 2;
inline constexpr uint32_t kPfR = 4;

struct ElfSegment {  // one program header
  uint32_t type = 0;
  uint32_t flags = 0;  // PF_R|PF_W|PF_X
  uint64_t offset = 0;
  uint64_t vaddr = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
  uint64_t align = 0;
};

struct ElfSymbol {
  std::string name;
  uint64_t value = 0;   // st_value: the link-time virtual address for EXEC/DYN files
  uint64_t size = 0;
  uint8_t type = 0;     // STT_*
  uint8_t bind = 0;     // STB_*
  uint16_t section = 0; // st_shndx (0 = undefined)
  bool from_dynsym = false;
};

struct ElfSection {  // one section header
  uint32_t type = 0;    // SHT_*
  uint64_t flags = 0;   // SHF_*
  uint64_t addr = 0;    // link-time address (0 when not loaded)
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0;
  uint64_t entsize = 0;
};

// Reads the underlying bytes; one implementation over a file descriptor, one over memory.
class ElfByteSource;

class ElfFile {
 public:
  // Opens and validates the header and program headers. Errors: kNotFound/kPermission/kIo for the
  // file, kBadMagic (not ELF), kUnsupported (32-bit, big-endian), kTruncated, kCorrupt.
  static Result<ElfFile> Open(const std::string& path);
  static Result<ElfFile> FromBytes(std::vector<uint8_t> bytes, std::string name = "<memory>");

  const std::string& name() const { return name_; }
  uint64_t file_size() const;
  ElfType type() const { return type_; }
  uint16_t machine() const { return machine_; }
  uint64_t entry() const { return entry_; }
  const std::vector<ElfSegment>& segments() const { return segments_; }  // all program headers
  std::vector<ElfSegment> LoadSegments() const;  // PT_LOAD only, in file order
  // GNU build id from the PT_NOTE segments (or SHT_NOTE sections); empty when the file has none.
  const std::vector<uint8_t>& build_id() const { return build_id_; }

  // Looks a symbol up by exact (mangled) name, defined symbols only: .symtab first, then .dynsym.
  // kNotFound names the file and says whether it had a .symtab at all (stripped binaries).
  Result<ElfSymbol> FindSymbol(std::string_view name) const;
  // Every defined symbol of .symtab and .dynsym (for pickers and tests).
  Result<std::vector<ElfSymbol>> Symbols() const;

  // Every section header, in file order (empty when the file has none).
  Result<std::vector<ElfSection>> Sections() const { return ReadSections(); }

  // Maps a link-time virtual address to its file offset through the PT_LOAD segments.
  Result<uint64_t> VaddrToFileOffset(uint64_t vaddr) const;

 private:
  ElfFile() = default;
  static Result<ElfFile> Parse(std::shared_ptr<ElfByteSource> source, std::string name);
  Status ParseHeader();
  Status ParseBuildIdFromNotes();
  Status ParseBuildIdFromSections();
  using Section = ElfSection;
  Result<std::vector<Section>> ReadSections() const;
  Status ScanSymbols(const std::vector<Section>& sections, uint32_t table_type,
                     std::string_view wanted, std::vector<ElfSymbol>* out) const;

  std::shared_ptr<ElfByteSource> source_;
  std::string name_;
  ElfType type_ = ElfType::kNone;
  uint16_t machine_ = 0;
  uint64_t entry_ = 0;
  uint64_t phoff_ = 0, shoff_ = 0;
  uint16_t phentsize_ = 0, phnum_ = 0, shentsize_ = 0, shnum_ = 0;
  std::vector<ElfSegment> segments_;
  std::vector<uint8_t> build_id_;
};

// Parses GNU build id notes from the bytes of a note segment/section; nullopt when none.
std::optional<std::vector<uint8_t>> FindGnuBuildIdNote(const std::vector<uint8_t>& notes);

}  // namespace ptscope::record
