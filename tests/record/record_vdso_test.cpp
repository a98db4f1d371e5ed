#include "vdso.h"

#include <doctest/doctest.h>
#include <sys/auxv.h>

#include <cstring>

#include "elf_file.h"

namespace ptscope::record {

TEST_CASE("ReadVdso copies this process's vdso: an ELF at AT_SYSINFO_EHDR") {
  auto maps = ReadProcMaps(0);
  REQUIRE(maps);
  auto image = ReadVdso(0, *maps);
  REQUIRE(image);
  // The kernel tells us where it put the vdso independently of /proc/self/maps.
  CHECK(image->vaddr == getauxval(AT_SYSINFO_EHDR));
  const MapEntry* vdso = FindVdso(*maps);
  REQUIRE(vdso != nullptr);
  REQUIRE(image->bytes.size() == vdso->size());
  CHECK(std::memcmp(image->bytes.data(), reinterpret_cast<const void*>(image->vaddr),
                    image->bytes.size()) == 0);
  auto elf = ElfFile::FromBytes(image->bytes, "vdso64");
  REQUIRE(elf);
  CHECK(elf->type() == ElfType::kDyn);
  auto sym = elf->FindSymbol("__vdso_clock_gettime");
  REQUIRE(sym);
  CHECK(sym->from_dynsym);
}

TEST_CASE("ReadVdso and ReadProcessMemory fail cleanly") {
  std::vector<MapEntry> no_vdso;
  auto none = ReadVdso(0, no_vdso);
  REQUIRE(!none);
  CHECK(none.error().code == Errc::kNotFound);
  CHECK(none.error().message == "/proc/self/maps: the process has no [vdso] mapping");
  auto unmapped = ReadProcessMemory(0, 0x10, 16);  // page 0 is never mapped
  REQUIRE(!unmapped);
  CHECK(unmapped.error().code == Errc::kIo);
  CHECK(unmapped.error().message == "/proc/self/mem: read at 0x10 failed: Input/output error");
}

}  // namespace ptscope::record
