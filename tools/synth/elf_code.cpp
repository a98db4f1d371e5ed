#include "elf_code.h"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace ptscope::synth {
namespace {

constexpr uint32_t kPtLoad = 1, kPtNote = 4;
constexpr uint32_t kPfX = 1;
constexpr uint64_t kShfExecInstr = 4;
constexpr uint32_t kShtSymtab = 2, kShtDynsym = 11;
constexpr uint32_t kNtGnuBuildId = 3;

// Bounds-checked little-endian reads of the file; the first failure is remembered and named.
class FileBytes {
 public:
  FileBytes(const std::vector<uint8_t>& bytes, const std::string& path) : b_(bytes), path_(path) {}
  uint64_t Read(uint64_t offset, int width, const char* field) {
    if (offset > b_.size() || b_.size() - offset < static_cast<uint64_t>(width)) {
      if (error_.empty()) {
        error_ = path_ + ": " + field + " at file offset " + std::to_string(offset) +
                 " lies past the end of the file (" + std::to_string(b_.size()) +
                 " bytes); the ELF is truncated or corrupt";
      }
      return 0;
    }
    uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) value = (value << 8) | b_[offset + i];
    return value;
  }
  uint64_t U16(uint64_t o, const char* f) { return Read(o, 2, f); }
  uint64_t U32(uint64_t o, const char* f) { return Read(o, 4, f); }
  uint64_t U64(uint64_t o, const char* f) { return Read(o, 8, f); }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  const std::vector<uint8_t>& b_;
  const std::string& path_;
  std::string error_;
};

Result<std::vector<uint8_t>> ReadWholeFile(const std::string& path, int64_t* mtime_ns) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Unexpected(Errc::kNotFound, path + ": not a readable regular file (check --binary)");
  }
  *mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file) return Unexpected(Errc::kIo, path + ": cannot open for reading");
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  if (!bytes.empty() && std::fread(bytes.data(), 1, bytes.size(), file.get()) != bytes.size()) {
    return Unexpected(Errc::kIo, path + ": short read");
  }
  return bytes;
}

void ReadBuildId(FileBytes& f, uint64_t offset, uint64_t size, std::vector<uint8_t>* id,
                 const std::vector<uint8_t>& bytes) {
  const uint64_t end = offset + size;
  while (f.ok() && offset + 12 <= end) {
    const uint64_t namesz = f.U32(offset, "note namesz"), descsz = f.U32(offset + 4, "note descsz");
    const uint64_t type = f.U32(offset + 8, "note type");
    const uint64_t desc = offset + 12 + ((namesz + 3) & ~uint64_t{3});
    if (namesz > size || descsz > size) return;
    if (type == kNtGnuBuildId && namesz == 4 && desc + descsz <= end && desc + descsz <= bytes.size() &&
        f.U32(offset + 12, "note name") == 0x00554e47 /* "GNU\0" */) {
      id->assign(bytes.begin() + static_cast<long>(desc), bytes.begin() + static_cast<long>(desc + descsz));
      return;
    }
    offset = desc + ((descsz + 3) & ~uint64_t{3});
  }
}

void ReadFunctionSymbols(FileBytes& f, ElfCode& elf, uint64_t symtab_off, uint64_t symtab_size) {
  constexpr uint64_t kSymSize = 24;
  for (uint64_t o = symtab_off; f.ok() && o + kSymSize <= symtab_off + symtab_size; o += kSymSize) {
    const uint64_t info = f.Read(o + 4, 1, "symbol st_info");
    const uint64_t shndx = f.U16(o + 6, "symbol st_shndx");
    const uint64_t value = f.U64(o + 8, "symbol st_value");
    if ((info & 0xf) == 2 /* STT_FUNC */ && shndx != 0 && value != 0) {
      elf.function_entries.push_back(elf.load_base + value);
    }
  }
}

}  // namespace

const uint8_t* ElfCode::CodeAt(uint64_t ip, uint64_t* available) const {
  auto it = std::upper_bound(code.begin(), code.end(), ip,
                             [](uint64_t v, const CodeRange& r) { return v < r.start; });
  if (it == code.begin()) return nullptr;
  --it;
  if (ip - it->start >= it->size) return nullptr;
  *available = it->size - (ip - it->start);
  return bytes.data() + it->file_offset + (ip - it->start);
}

Result<ElfCode> LoadElfCode(const std::string& path) {
  ElfCode elf;
  char resolved[PATH_MAX];
  elf.path = realpath(path.c_str(), resolved) != nullptr ? resolved : path;
  PTSCOPE_ASSIGN_OR_RETURN(elf.bytes, ReadWholeFile(elf.path, &elf.mtime_ns));
  const auto& b = elf.bytes;
  if (b.size() < 64 || b[0] != 0x7f || b[1] != 'E' || b[2] != 'L' || b[3] != 'F') {
    return Unexpected(Errc::kBadMagic, path + ": not an ELF file (pass an x86-64 executable)");
  }
  FileBytes f(b, elf.path);
  if (b[4] != 2 || b[5] != 1 || f.U16(18, "e_machine") != 62) {
    return Unexpected(Errc::kUnsupported,
                      path + ": not a 64-bit little-endian x86-64 ELF (e_ident/e_machine); pt-synth "
                      "walks x86-64 code only");
  }
  const uint64_t type = f.U16(16, "e_type");
  elf.pie = type == 3;
  elf.load_base = elf.pie ? kPieBase : 0;
  elf.entry = f.U64(24, "e_entry") + elf.load_base;
  const uint64_t phoff = f.U64(32, "e_phoff"), shoff = f.U64(40, "e_shoff");
  const uint64_t phentsize = f.U16(54, "e_phentsize"), phnum = f.U16(56, "e_phnum");
  const uint64_t shentsize = f.U16(58, "e_shentsize"), shnum = f.U16(60, "e_shnum");
  for (uint64_t i = 0; f.ok() && i < phnum && phentsize >= 56; ++i) {
    const uint64_t p = phoff + i * phentsize;
    const uint64_t ptype = f.U32(p, "p_type"), flags = f.U32(p + 4, "p_flags");
    const uint64_t offset = f.U64(p + 8, "p_offset"), vaddr = f.U64(p + 16, "p_vaddr");
    const uint64_t filesz = f.U64(p + 32, "p_filesz"), memsz = f.U64(p + 40, "p_memsz");
    if (ptype == kPtLoad && (flags & kPfX) != 0 && filesz > 0 && offset + filesz <= b.size()) {
      elf.segments.push_back({vaddr, offset, filesz, memsz});
    } else if (ptype == kPtNote && elf.build_id.empty()) {
      ReadBuildId(f, offset, filesz, &elf.build_id, b);
    }
  }
  if (!f.ok()) return Unexpected(Errc::kCorrupt, f.error());
  if (elf.segments.empty()) {
    return Unexpected(Errc::kCorrupt, path + ": no executable PT_LOAD segment with file bytes");
  }
  for (uint64_t i = 0; f.ok() && i < shnum && shentsize >= 64; ++i) {
    const uint64_t s = shoff + i * shentsize;
    const uint64_t stype = f.U32(s + 4, "sh_type"), flags = f.U64(s + 8, "sh_flags");
    const uint64_t addr = f.U64(s + 16, "sh_addr"), offset = f.U64(s + 24, "sh_offset");
    const uint64_t size = f.U64(s + 32, "sh_size");
    if ((flags & kShfExecInstr) != 0 && stype != 8 /* NOBITS */ && size > 0 &&
        offset + size <= b.size()) {
      elf.code.push_back({elf.load_base + addr, offset, size});
    } else if ((stype == kShtSymtab || stype == kShtDynsym) && offset + size <= b.size()) {
      ReadFunctionSymbols(f, elf, offset, size);
    }
  }
  if (!f.ok()) return Unexpected(Errc::kCorrupt, f.error());
  if (elf.code.empty()) {  // no section headers: the whole executable segments are code
    for (const ExecSegment& seg : elf.segments) {
      elf.code.push_back({elf.load_base + seg.vaddr, seg.offset, seg.filesz});
    }
  }
  std::sort(elf.code.begin(), elf.code.end(),
            [](const CodeRange& a, const CodeRange& c) { return a.start < c.start; });
  elf.function_entries.push_back(elf.entry);
  std::sort(elf.function_entries.begin(), elf.function_entries.end());
  elf.function_entries.erase(std::unique(elf.function_entries.begin(), elf.function_entries.end()),
                             elf.function_entries.end());
  return elf;
}

}  // namespace ptscope::synth
