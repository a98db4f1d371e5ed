// libFuzzer target: both ELF readers on arbitrary bytes — pt-record's own (record/src/elf_file.h:
// headers, build-id notes, symbol tables) and the decoder's ELF facts through LLVM Object
// (symbols: build id, PT_LOAD segments, .gnu_debuglink), which reads a path: the bytes are put in
// a memfd and read through /proc/self/fd.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "elf_file.h"
#include "ptscope/symbols.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  (void)ptscope::record::FindGnuBuildIdNote(bytes);
  auto elf = ptscope::record::ElfFile::FromBytes(bytes, "fuzz.elf");
  if (elf) {
    (void)elf->build_id();
    (void)elf->LoadSegments();
    (void)elf->Symbols();
    (void)elf->FindSymbol("main");
    (void)elf->VaddrToFileOffset(elf->entry());
  }
  static const int fd = ::memfd_create("fuzz-elf", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) return 0;
  if (::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  auto info = ptscope::symbols::ReadElfInfo(path);
  if (info) {
    for (const ptscope::symbols::LoadSegment& segment : info->segments) {
      (void)ptscope::symbols::FileOffsetToVaddr(*info, segment.offset + segment.filesz / 2);
    }
  }
  return 0;
}
