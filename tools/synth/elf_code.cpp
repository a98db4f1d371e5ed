#include "elf_code.h"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "elf_file.h"

namespace ptscope::synth {
namespace {

constexpr uint64_t kShfExecInstr = 4;
constexpr uint32_t kShtNobits = 8;
constexpr uint8_t kSttFunc = 2;
constexpr uint16_t kEmX8664 = 62;

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
  // The ELF facts from pt-record's reader (the one bounds-checked ELF reader without LLVM); the
  // bytes stay here for CodeAt.
  PTSCOPE_ASSIGN_OR_RETURN(record::ElfFile file, record::ElfFile::FromBytes(elf.bytes, elf.path));
  if (file.machine() != kEmX8664) {
    return Unexpected(Errc::kUnsupported,
                      path + ": not an x86-64 ELF (e_machine " + std::to_string(file.machine()) +
                          "); pt-synth walks x86-64 code only");
  }
  elf.pie = file.type() == record::ElfType::kDyn;
  elf.load_base = elf.pie ? kPieBase : 0;
  elf.entry = file.entry() + elf.load_base;
  const uint64_t size = elf.bytes.size();
  for (const record::ElfSegment& seg : file.LoadSegments()) {
    if ((seg.flags & record::kPfX) != 0 && seg.filesz > 0 && seg.offset + seg.filesz <= size) {
      elf.segments.push_back({seg.vaddr, seg.offset, seg.filesz, seg.memsz});
    }
  }
  elf.build_id = file.build_id();
  if (elf.segments.empty()) {
    return Unexpected(Errc::kCorrupt, path + ": no executable PT_LOAD segment with file bytes");
  }
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<record::ElfSection> sections, file.Sections());
  for (const record::ElfSection& sec : sections) {
    if ((sec.flags & kShfExecInstr) != 0 && sec.type != kShtNobits && sec.size > 0 &&
        sec.offset + sec.size <= size) {
      elf.code.push_back({elf.load_base + sec.addr, sec.offset, sec.size});
    }
  }
  if (elf.code.empty()) {  // no section headers: the whole executable segments are code
    for (const ExecSegment& seg : elf.segments) {
      elf.code.push_back({elf.load_base + seg.vaddr, seg.offset, seg.filesz});
    }
  }
  std::sort(elf.code.begin(), elf.code.end(),
            [](const CodeRange& a, const CodeRange& c) { return a.start < c.start; });
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<record::ElfSymbol> symbols, file.Symbols());
  for (const record::ElfSymbol& sym : symbols) {
    if (sym.type == kSttFunc && sym.value != 0) {
      elf.function_entries.push_back(elf.load_base + sym.value);
    }
  }
  elf.function_entries.push_back(elf.entry);
  std::sort(elf.function_entries.begin(), elf.function_entries.end());
  elf.function_entries.erase(std::unique(elf.function_entries.begin(), elf.function_entries.end()),
                             elf.function_entries.end());
  return elf;
}

}  // namespace ptscope::synth
