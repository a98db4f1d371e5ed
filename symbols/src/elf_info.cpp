// ELF facts through LLVM Object: build id, PT_LOAD segments, stripped or not, .gnu_debuglink.
#include <llvm/Object/BuildID.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/CRC.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>

#include "ptscope/symbols.h"

namespace ptscope::symbols {
namespace {

std::string ErrorText(llvm::Error error) { return llvm::toString(std::move(error)); }

void ReadSections(const llvm::object::ELF64LEObjectFile& elf, ElfInfo& info) {
  for (const llvm::object::SectionRef& section : elf.sections()) {
    llvm::Expected<llvm::StringRef> name = section.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name == ".symtab") info.has_symtab = true;
    if (*name == ".debug_info") info.has_debug_info = true;
    if (*name == ".text") {
      info.code_is_nobits = llvm::object::ELFSectionRef(section).getType() == llvm::ELF::SHT_NOBITS;
    }
    if (*name == ".gnu_debuglink") {
      llvm::Expected<llvm::StringRef> contents = section.getContents();
      if (!contents) {
        llvm::consumeError(contents.takeError());
        continue;
      }
      // NUL-terminated file name, zero padding to a multiple of 4, then the debug file's CRC-32
      // (little-endian here: ELF64LE only).
      llvm::StringRef text = *contents;
      size_t nul = text.find('\0');
      if (nul == llvm::StringRef::npos) continue;  // malformed: no usable link
      size_t crc_at = (nul + 1 + 3) / 4 * 4;
      if (crc_at + 4 > text.size()) continue;
      info.debuglink = text.substr(0, nul).str();
      const auto* crc = reinterpret_cast<const uint8_t*>(text.data()) + crc_at;
      info.debuglink_crc = uint32_t{crc[0]} | uint32_t{crc[1]} << 8 | uint32_t{crc[2]} << 16 |
                           uint32_t{crc[3]} << 24;
    }
  }
}

}  // namespace

Result<ElfInfo> ReadElfInfo(const std::string& path) {
  llvm::Expected<llvm::object::OwningBinary<llvm::object::ObjectFile>> owning =
      llvm::object::ObjectFile::createObjectFile(path);
  if (!owning) {
    return Unexpected(Errc::kBadMagic, path + ": not a readable ELF file (" +
                                           ErrorText(owning.takeError()) + ")");
  }
  const auto* elf = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(owning->getBinary());
  if (elf == nullptr) {
    return Unexpected(Errc::kBadMagic, path + ": not a 64-bit little-endian ELF file");
  }
  ElfInfo info;
  info.entry = elf->getELFFile().getHeader().e_entry;
  auto headers = elf->getELFFile().program_headers();
  if (!headers) {
    return Unexpected(Errc::kCorrupt,
                      path + ": bad program headers (" + ErrorText(headers.takeError()) + ")");
  }
  // LLVM's note reader checks p_offset + p_filesz against the file size, a sum a damaged header
  // can wrap (the elf fuzz target crashed getBuildID so): each note segment is checked here first.
  const uint64_t file_size = elf->getData().size();
  for (size_t index = 0; index != headers->size(); ++index) {
    const auto& phdr = (*headers)[index];
    if (phdr.p_type == llvm::ELF::PT_NOTE &&
        (phdr.p_offset > file_size || phdr.p_filesz > file_size - phdr.p_offset)) {
      return Unexpected(Errc::kCorrupt, path + ": note segment (program header " +
                                            std::to_string(index) + ") at offset " +
                                            std::to_string(phdr.p_offset) + ", " +
                                            std::to_string(phdr.p_filesz) +
                                            " bytes, lies beyond the " +
                                            std::to_string(file_size) + "-byte file");
    }
  }
  llvm::ArrayRef<uint8_t> build_id = llvm::object::getBuildID(elf);
  info.build_id.assign(build_id.begin(), build_id.end());
  for (const auto& phdr : *headers) {
    if (phdr.p_type != llvm::ELF::PT_LOAD) continue;
    info.segments.push_back(LoadSegment{phdr.p_vaddr, phdr.p_memsz, phdr.p_offset, phdr.p_filesz,
                                        (phdr.p_flags & llvm::ELF::PF_X) != 0});
  }
  ReadSections(*elf, info);
  return info;
}

Result<uint32_t> FileCrc32(const std::string& path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) return Unexpected(Errc::kIo, path + ": cannot read (" + buffer.getError().message() + ")");
  llvm::StringRef bytes = (*buffer)->getBuffer();
  return llvm::crc32(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                             bytes.size()));
}

std::optional<uint64_t> FileOffsetToVaddr(const ElfInfo& elf, uint64_t file_offset) {
  // File bytes first: a segment's .bss tail can overlap the next segment's file offsets.
  for (const LoadSegment& segment : elf.segments) {
    if (file_offset >= segment.offset && file_offset - segment.offset < segment.filesz) {
      return segment.vaddr + (file_offset - segment.offset);
    }
  }
  for (const LoadSegment& segment : elf.segments) {
    if (file_offset >= segment.offset && file_offset - segment.offset < segment.memsz) {
      return segment.vaddr + (file_offset - segment.offset);
    }
  }
  return std::nullopt;
}

}  // namespace ptscope::symbols
