#include "elf_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ptscope/file_read.h"
#include "ptscope/format.h"

namespace ptscope::record {

class ElfByteSource {
 public:
  virtual ~ElfByteSource() = default;
  virtual uint64_t size() const = 0;
  // Reads exactly `length` bytes at `offset`; the caller has bounds-checked against size().
  virtual Status ReadAt(uint64_t offset, uint64_t length, uint8_t* out) const = 0;
};

namespace {

constexpr uint64_t kEhdrSize = 64;
constexpr uint64_t kPhdrSize = 56;
constexpr uint64_t kShdrSize = 64;
constexpr uint64_t kSymSize = 24;
constexpr uint32_t kShtSymtab = 2;
constexpr uint32_t kShtNote = 7;
constexpr uint32_t kShtDynsym = 11;
constexpr uint32_t kNtGnuBuildId = 3;
constexpr uint64_t kMaxTableBytes = 1ull << 30;  // refuse absurd symbol tables instead of OOM
constexpr uint16_t kMaxPhnum = 0xffff;

uint16_t Le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t Le64(const uint8_t* p) {
  return static_cast<uint64_t>(Le32(p)) | (static_cast<uint64_t>(Le32(p + 4)) << 32);
}

using ::ptscope::format::HexAddress;

class MemorySource : public ElfByteSource {
 public:
  explicit MemorySource(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  uint64_t size() const override { return bytes_.size(); }
  Status ReadAt(uint64_t offset, uint64_t length, uint8_t* out) const override {
    if (length > 0) std::memcpy(out, bytes_.data() + offset, length);
    return Ok();
  }

 private:
  std::vector<uint8_t> bytes_;
};

class FileSource : public ElfByteSource {
 public:
  FileSource(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  ~FileSource() override { close(fd_); }
  uint64_t size() const override { return size_; }
  Status ReadAt(uint64_t offset, uint64_t length, uint8_t* out) const override {
    const format::FileRead read = format::ReadFileAt(fd_, offset, static_cast<size_t>(length), out);
    if (read.bytes == length) return Ok();
    return MakeError(Errc::kIo, path_ + ": read at offset " + HexAddress(offset + read.bytes) +
                                    " failed: " +
                                    (read.error == 0 ? "file shrank while reading"
                                                     : std::strerror(read.error)));
  }

 private:
  int fd_;
  uint64_t size_;
  std::string path_;
};

// Bounds-checked read of [offset, offset+length) into a vector; `what` names the structure.
Result<std::vector<uint8_t>> ReadRange(const ElfByteSource& src, const std::string& name,
                                       uint64_t offset, uint64_t length, const char* what) {
  if (offset > src.size() || length > src.size() - offset)
    return MakeError(Errc::kTruncated, name + ": " + what + " at offset " + HexAddress(offset) + " (" +
                                           std::to_string(length) + " bytes) ends beyond the " +
                                           std::to_string(src.size()) + "-byte file");
  std::vector<uint8_t> bytes(length);
  PTSCOPE_TRY(src.ReadAt(offset, length, bytes.data()));
  return bytes;
}

uint64_t AlignUp4(uint64_t v) { return (v + 3) & ~uint64_t{3}; }

}  // namespace

std::optional<std::vector<uint8_t>> FindGnuBuildIdNote(const std::vector<uint8_t>& notes) {
  uint64_t pos = 0;
  while (notes.size() >= 12 && pos <= notes.size() - 12) {
    uint64_t namesz = Le32(&notes[pos]);
    uint64_t descsz = Le32(&notes[pos + 4]);
    uint32_t type = Le32(&notes[pos + 8]);
    uint64_t name_at = pos + 12;
    uint64_t desc_at = name_at + AlignUp4(namesz);
    uint64_t next = desc_at + AlignUp4(descsz);
    if (desc_at > notes.size() || descsz > notes.size() - desc_at) return std::nullopt;
    if (type == kNtGnuBuildId && namesz == 4 && std::memcmp(&notes[name_at], "GNU", 4) == 0)
      return std::vector<uint8_t>(notes.begin() + static_cast<long>(desc_at),
                                  notes.begin() + static_cast<long>(desc_at + descsz));
    pos = next;
  }
  return std::nullopt;
}

Result<ElfFile> ElfFile::Open(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    Errc code = ErrcFromErrno(err);
    return MakeError(code, path + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return MakeError(Errc::kInvalidArgument, path + ": not a regular file");
  }
  auto source = std::make_shared<FileSource>(fd, static_cast<uint64_t>(st.st_size), path);
  return Parse(std::move(source), path);
}

Result<ElfFile> ElfFile::FromBytes(std::vector<uint8_t> bytes, std::string name) {
  return Parse(std::make_shared<MemorySource>(std::move(bytes)), std::move(name));
}

Result<ElfFile> ElfFile::Parse(std::shared_ptr<ElfByteSource> source, std::string name) {
  ElfFile elf;
  elf.source_ = std::move(source);
  elf.name_ = std::move(name);
  PTSCOPE_TRY(elf.ParseHeader());
  PTSCOPE_TRY(elf.ParseBuildIdFromNotes());
  if (elf.build_id_.empty()) PTSCOPE_TRY(elf.ParseBuildIdFromSections());
  return elf;
}

uint64_t ElfFile::file_size() const { return source_->size(); }

Status ElfFile::ParseHeader() {
  if (source_->size() < 4)
    return MakeError(Errc::kTruncated, name_ + ": " + std::to_string(source_->size()) +
                                           "-byte file is too short for an ELF header");
  uint8_t magic[4];
  PTSCOPE_TRY(source_->ReadAt(0, 4, magic));
  if (std::memcmp(magic, "\x7f" "ELF", 4) != 0)
    return MakeError(Errc::kBadMagic, name_ + ": not an ELF file (no \\x7fELF magic at offset 0)");
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> ehdr,
                           ReadRange(*source_, name_, 0, kEhdrSize, "ELF header"));
  if (ehdr[4] != 2)
    return MakeError(Errc::kUnsupported, name_ + ": ELF class " + std::to_string(ehdr[4]) +
                                             " at offset 4 is not ELF64; only 64-bit x86-64 "
                                             "programs can be traced");
  if (ehdr[5] != 1)
    return MakeError(Errc::kUnsupported, name_ + ": big-endian ELF (offset 5) is not supported");
  type_ = static_cast<ElfType>(Le16(&ehdr[16]));
  machine_ = Le16(&ehdr[18]);
  entry_ = Le64(&ehdr[24]);
  phoff_ = Le64(&ehdr[32]);
  shoff_ = Le64(&ehdr[40]);
  phentsize_ = Le16(&ehdr[54]);
  phnum_ = Le16(&ehdr[56]);
  shentsize_ = Le16(&ehdr[58]);
  shnum_ = Le16(&ehdr[60]);
  if (phnum_ == 0) return Ok();
  if (phentsize_ < kPhdrSize || phnum_ >= kMaxPhnum)
    return MakeError(Errc::kCorrupt, name_ + ": e_phentsize " + std::to_string(phentsize_) +
                                         " / e_phnum " + std::to_string(phnum_) +
                                         " (offset 54) are impossible");
  PTSCOPE_ASSIGN_OR_RETURN(
      std::vector<uint8_t> table,
      ReadRange(*source_, name_, phoff_, uint64_t{phentsize_} * phnum_, "program header table"));
  for (uint16_t i = 0; i < phnum_; ++i) {
    const uint8_t* p = &table[uint64_t{i} * phentsize_];
    ElfSegment seg;
    seg.type = Le32(p);
    seg.flags = Le32(p + 4);
    seg.offset = Le64(p + 8);
    seg.vaddr = Le64(p + 16);
    seg.filesz = Le64(p + 32);
    seg.memsz = Le64(p + 40);
    seg.align = Le64(p + 48);
    segments_.push_back(seg);
  }
  return Ok();
}

Status ElfFile::ParseBuildIdFromNotes() {
  for (const ElfSegment& seg : segments_) {
    if (seg.type != kPtNote) continue;
    PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> notes,
                             ReadRange(*source_, name_, seg.offset, seg.filesz, "PT_NOTE segment"));
    if (auto id = FindGnuBuildIdNote(notes)) {
      build_id_ = std::move(*id);
      return Ok();
    }
  }
  return Ok();
}

Status ElfFile::ParseBuildIdFromSections() {
  if (!segments_.empty() || shnum_ == 0) return Ok();  // executables carry notes in segments
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<Section> sections, ReadSections());
  for (const Section& sec : sections) {
    if (sec.type != kShtNote) continue;
    PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> notes,
                             ReadRange(*source_, name_, sec.offset, sec.size, "SHT_NOTE section"));
    if (auto id = FindGnuBuildIdNote(notes)) {
      build_id_ = std::move(*id);
      return Ok();
    }
  }
  return Ok();
}

std::vector<ElfSegment> ElfFile::LoadSegments() const {
  std::vector<ElfSegment> loads;
  for (const ElfSegment& seg : segments_)
    if (seg.type == kPtLoad) loads.push_back(seg);
  return loads;
}

Result<uint64_t> ElfFile::VaddrToFileOffset(uint64_t vaddr) const {
  for (const ElfSegment& seg : segments_) {
    if (seg.type == kPtLoad && vaddr >= seg.vaddr && vaddr - seg.vaddr < seg.filesz)
      return seg.offset + (vaddr - seg.vaddr);
  }
  return MakeError(Errc::kNotFound,
                   name_ + ": address " + HexAddress(vaddr) + " is not inside any PT_LOAD segment's file bytes");
}

Result<std::vector<ElfFile::Section>> ElfFile::ReadSections() const {
  std::vector<Section> sections;
  if (shnum_ == 0 || shoff_ == 0) return sections;
  if (shentsize_ < kShdrSize)
    return MakeError(Errc::kCorrupt, name_ + ": e_shentsize " + std::to_string(shentsize_) +
                                         " (offset 58) is smaller than 64");
  PTSCOPE_ASSIGN_OR_RETURN(
      std::vector<uint8_t> table,
      ReadRange(*source_, name_, shoff_, uint64_t{shentsize_} * shnum_, "section header table"));
  for (uint16_t i = 0; i < shnum_; ++i) {
    const uint8_t* p = &table[uint64_t{i} * shentsize_];
    Section sec;
    sec.type = Le32(p + 4);
    sec.flags = Le64(p + 8);
    sec.addr = Le64(p + 16);
    sec.offset = Le64(p + 24);
    sec.size = Le64(p + 32);
    sec.link = Le32(p + 40);
    sec.entsize = Le64(p + 56);
    sections.push_back(sec);
  }
  return sections;
}

// Appends the defined symbols of every section of `table_type` to `out`; with a non-empty
// `wanted`, only those with that name (and stops at the first).
Status ElfFile::ScanSymbols(const std::vector<Section>& sections, uint32_t table_type,
                            std::string_view wanted, std::vector<ElfSymbol>* out) const {
  for (const Section& sec : sections) {
    if (sec.type != table_type) continue;
    if (sec.link >= sections.size() || sec.size > kMaxTableBytes ||
        sections[sec.link].size > kMaxTableBytes)
      return MakeError(Errc::kCorrupt, name_ + ": symbol table at offset " + HexAddress(sec.offset) +
                                           " has an impossible size or string table link");
    uint64_t entsize = sec.entsize == 0 ? kSymSize : sec.entsize;
    if (entsize < kSymSize)
      return MakeError(Errc::kCorrupt, name_ + ": symbol entry size " + std::to_string(entsize) +
                                           " at offset " + HexAddress(sec.offset) + " is below 24");
    if (entsize > sec.size && sec.size != 0)
      return MakeError(Errc::kCorrupt, name_ + ": symbol entry size " + std::to_string(entsize) +
                                           " at offset " + HexAddress(sec.offset) +
                                           " is larger than its table (" +
                                           std::to_string(sec.size) + " bytes)");
    PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> syms,
                             ReadRange(*source_, name_, sec.offset, sec.size, "symbol table"));
    const Section& strsec = sections[sec.link];
    PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> strs,
                             ReadRange(*source_, name_, strsec.offset, strsec.size, "string table"));
    // Entries by index, not `pos += entsize`: a huge entsize (all ones) would wrap the offset
    // back into the table (found by the elf fuzz target).
    const uint64_t count = syms.size() < kSymSize ? 0 : (syms.size() - kSymSize) / entsize + 1;
    for (uint64_t index = 0; index != count; ++index) {
      const uint8_t* p = &syms[index * entsize];
      uint32_t name_off = Le32(p);
      uint16_t shndx = Le16(p + 6);
      if (shndx == 0 || name_off >= strs.size()) continue;  // undefined or unnamed
      const char* name_ptr = reinterpret_cast<const char*>(&strs[name_off]);
      size_t name_len = strnlen(name_ptr, strs.size() - name_off);
      std::string_view name(name_ptr, name_len);
      if (name.empty() || (!wanted.empty() && name != wanted)) continue;
      ElfSymbol sym;
      sym.name = std::string(name);
      sym.type = p[4] & 0xf;
      sym.bind = p[4] >> 4;
      sym.section = shndx;
      sym.value = Le64(p + 8);
      sym.size = Le64(p + 16);
      sym.from_dynsym = table_type == kShtDynsym;
      out->push_back(std::move(sym));
      if (!wanted.empty()) return Ok();
    }
  }
  return Ok();
}

Result<ElfSymbol> ElfFile::FindSymbol(std::string_view name) const {
  if (name.empty()) return MakeError(Errc::kInvalidArgument, name_ + ": empty symbol name");
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<Section> sections, ReadSections());
  std::vector<ElfSymbol> found;
  PTSCOPE_TRY(ScanSymbols(sections, kShtSymtab, name, &found));
  if (found.empty()) PTSCOPE_TRY(ScanSymbols(sections, kShtDynsym, name, &found));
  if (!found.empty()) return found.front();
  bool has_symtab = false;
  for (const Section& sec : sections) has_symtab |= sec.type == kShtSymtab;
  return MakeError(Errc::kNotFound,
                   name_ + ": no defined symbol '" + std::string(name) + "'" +
                       (has_symtab ? "" : " (the file has no .symtab: it is stripped; use 0xADDR "
                                          "or an unstripped build)"));
}

Result<std::vector<ElfSymbol>> ElfFile::Symbols() const {
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<Section> sections, ReadSections());
  std::vector<ElfSymbol> all;
  PTSCOPE_TRY(ScanSymbols(sections, kShtSymtab, {}, &all));
  PTSCOPE_TRY(ScanSymbols(sections, kShtDynsym, {}, &all));
  return all;
}

}  // namespace ptscope::record
