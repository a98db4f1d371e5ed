// SymbolsFrameNamer over a real ELF file (this test's own executable): the facts the stages ask
// of the code, here IsProgramEntry, which lets a thread traced from its process's first
// instruction write its slices without holding them back (stack/stack_tracker.h, Buffering).
#include "names/frame_namer.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "ptscope/symbols.h"

namespace ptscope::decode {
namespace {

TEST_CASE("IsProgramEntry: the e_entry of the file mapped there, in that process, only") {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  Result<symbols::ElfInfo> elf = symbols::ReadElfInfo(self);
  REQUIRE(elf.has_value());
  REQUIRE(elf->entry != 0);
  // The entry's file offset, through the PT_LOAD holding it: the file is mapped whole at kBase.
  uint64_t entry_offset = 0;
  for (const symbols::LoadSegment& segment : elf->segments) {
    if (elf->entry >= segment.vaddr && elf->entry - segment.vaddr < segment.filesz) {
      entry_offset = segment.offset + (elf->entry - segment.vaddr);
    }
  }
  REQUIRE(entry_offset != 0);
  const uint64_t size = std::filesystem::file_size(self);
  constexpr uint64_t kBase = 0x500000000000;
  symbols::AddressSpace space;
  space.Map(1, 0, kBase, size, 0, space.InternModule(self, elf->build_id));
  symbols::ModuleResolver resolver({});
  symbols::Symbolizer symbolizer;
  SymbolsFrameNamer namer(space, resolver, symbolizer);
  CHECK(namer.IsProgramEntry(1, kBase + entry_offset, 0));
  CHECK_FALSE(namer.IsProgramEntry(1, kBase + entry_offset + 1, 0));
  CHECK_FALSE(namer.IsProgramEntry(1, kBase + entry_offset - 1, 0));
  CHECK_FALSE(namer.IsProgramEntry(2, kBase + entry_offset, 0));  // not mapped in process 2
  CHECK_FALSE(namer.IsProgramEntry(1, kBase + size + 0x10000, 0));  // past the mapping
  // The entry is _start's first byte (glibc's crt1), as the symbolizer names it.
  CHECK(namer.FunctionStart(1, kBase + entry_offset, 0) == kBase + entry_offset);
  CHECK(namer.Name(1, kBase + entry_offset, 0).name == "_start");
}

}  // namespace
}  // namespace ptscope::decode
