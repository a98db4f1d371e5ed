#include "elf_file.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "proc_maps.h"
#include "record_test_util.h"

// A function with a known name and C linkage, looked up in our own .symtab.
extern "C" __attribute__((noinline, used)) int ptscope_record_test_known_function(int x) {
  return x * 3 + 1;
}

namespace ptscope::record {
namespace {

std::vector<uint8_t> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("ElfFile reads this test binary: type, build id, entry, loads") {
  std::string exe = test::SelfExePath();
  auto elf = ElfFile::Open(exe);
  REQUIRE(elf);
  std::string expected_id = test::ReadelfBuildId(exe);
  REQUIRE(!expected_id.empty());  // Debian's gcc always links with --build-id
  CHECK(test::ToHexString(elf->build_id()) == expected_id);
  std::string header = test::RunCommand("readelf -h '" + exe + "'");
  bool pie = header.find("Type:                              DYN") != std::string::npos;
  CHECK(elf->type() == (pie ? ElfType::kDyn : ElfType::kExec));
  CHECK(elf->machine() == 62);  // EM_X86_64
  char entry_text[32];
  std::snprintf(entry_text, sizeof entry_text, "0x%llx", static_cast<unsigned long long>(elf->entry()));
  CHECK(header.find(std::string("Entry point address:               ") + entry_text + "\n") !=
        std::string::npos);
  // Exactly one executable PT_LOAD, as `readelf -lW` counts them.
  int exec_loads = 0;
  for (const ElfSegment& seg : elf->LoadSegments()) exec_loads += (seg.flags & kPfX) ? 1 : 0;
  std::string loads = test::RunCommand("readelf -lW '" + exe + "' | grep -c '^  LOAD .* R E '");
  CHECK(exec_loads == std::stoi(loads));
  CHECK(elf->LoadSegments().size() ==
        std::stoul(test::RunCommand("readelf -lW '" + exe + "' | grep -c '^  LOAD '")));
}

TEST_CASE("FindSymbol gives the st_value that the loaded code really sits at") {
  std::string exe = test::SelfExePath();
  auto elf = ElfFile::Open(exe);
  REQUIRE(elf);
  auto sym = elf->FindSymbol("ptscope_record_test_known_function");
  REQUIRE(sym);
  CHECK(sym->type == 2);  // STT_FUNC
  CHECK(sym->size > 0);
  CHECK(!sym->from_dynsym);
  // Independent oracle: where the dynamic loader actually put the function.
  auto runtime = reinterpret_cast<uint64_t>(&ptscope_record_test_known_function);
  auto maps = ReadProcMaps(0);
  REQUIRE(maps);
  const MapEntry* map = FindMapping(*maps, runtime);
  REQUIRE(map != nullptr);
  auto file_offset = elf->VaddrToFileOffset(sym->value);
  REQUIRE(file_offset);
  CHECK(map->start + (*file_offset - map->offset) == runtime);
  CHECK(ptscope_record_test_known_function(2) == 7);

  auto missing = elf->FindSymbol("no_such_symbol_here");
  REQUIRE(!missing);
  CHECK(missing.error().code == Errc::kNotFound);
  CHECK(missing.error().message == exe + ": no defined symbol 'no_such_symbol_here'");
}

TEST_CASE("FindSymbol falls back to .dynsym (libc's malloc, from the loaded libc)") {
  auto maps = ReadProcMaps(0);
  REQUIRE(maps);
  std::string libc;
  for (const MapEntry& m : *maps)
    if (m.path.find("/libc.so.6") != std::string::npos) libc = m.path;
  REQUIRE(!libc.empty());
  auto elf = ElfFile::Open(libc);
  REQUIRE(elf);
  CHECK(test::ToHexString(elf->build_id()) == test::ReadelfBuildId(libc));
  auto sym = elf->FindSymbol("malloc");
  REQUIRE(sym);
  CHECK(sym->from_dynsym);  // Debian's libc is stripped of .symtab
  std::string nm = test::RunCommand("nm -D --defined-only '" + libc + "' | grep ' malloc@@'");
  REQUIRE(nm.size() > 16);
  CHECK(sym->value == std::stoull(nm.substr(0, 16), nullptr, 16));
}

TEST_CASE("ElfFile rejects non-ELF, truncated and 32-bit input with clear errors") {
  auto text = ElfFile::FromBytes({'#', '!', '/', 'b', 'i', 'n'}, "script.sh");
  REQUIRE(!text);
  CHECK(text.error().code == Errc::kBadMagic);
  CHECK(text.error().message == "script.sh: not an ELF file (no \\x7fELF magic at offset 0)");

  std::vector<uint8_t> whole = ReadWholeFile(test::SelfExePath());
  REQUIRE(whole.size() > 4096);
  auto tiny = ElfFile::FromBytes(std::vector<uint8_t>(whole.begin(), whole.begin() + 40), "cut");
  REQUIRE(!tiny);
  CHECK(tiny.error().code == Errc::kTruncated);
  CHECK(tiny.error().message ==
        "cut: ELF header at offset 0x0 (64 bytes) ends beyond the 40-byte file");

  // Cut inside the program header table (which starts at offset 64 in gcc output).
  auto in_phdrs = ElfFile::FromBytes(std::vector<uint8_t>(whole.begin(), whole.begin() + 100), "cut2");
  REQUIRE(!in_phdrs);
  CHECK(in_phdrs.error().code == Errc::kTruncated);
  CHECK(in_phdrs.error().message.rfind("cut2: program header table at offset 0x40 (", 0) == 0);

  // Headers intact, section table gone: the header parses, symbol lookup reports truncation.
  auto headers_only = ElfFile::FromBytes(std::vector<uint8_t>(whole.begin(), whole.begin() + 4096), "cut3");
  REQUIRE(headers_only);
  auto sym = headers_only->FindSymbol("main");
  REQUIRE(!sym);
  CHECK(sym.error().code == Errc::kTruncated);
  CHECK(sym.error().message.rfind("cut3: section header table at offset ", 0) == 0);

  std::vector<uint8_t> elf32(whole.begin(), whole.begin() + 64);
  elf32[4] = 1;  // ELFCLASS32
  auto narrow = ElfFile::FromBytes(elf32, "a.out32");
  REQUIRE(!narrow);
  CHECK(narrow.error().code == Errc::kUnsupported);
  CHECK(narrow.error().message ==
        "a.out32: ELF class 1 at offset 4 is not ELF64; only 64-bit x86-64 programs can be traced");

  auto missing = ElfFile::Open("/nonexistent/prog");
  REQUIRE(!missing);
  CHECK(missing.error().code == Errc::kNotFound);
  CHECK(missing.error().message == "/nonexistent/prog: cannot open: No such file or directory");
}

TEST_CASE("FindGnuBuildIdNote skips other notes and refuses an overlong descriptor") {
  std::vector<uint8_t> notes = {
      4, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 'G', 'N', 'U', 0, 9, 9, 9, 9,  // NT_GNU_ABI_TAG-ish
      4, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0, 0xab, 0xcd, 0xef, 0,  // build id, padded
  };
  auto id = FindGnuBuildIdNote(notes);
  REQUIRE(id);
  CHECK(*id == std::vector<uint8_t>{0xab, 0xcd, 0xef});
  notes[24] = 200;  // descsz beyond the buffer
  CHECK(!FindGnuBuildIdNote(notes));
}

TEST_CASE("A symbol table whose entry size exceeds the table is refused, not walked") {
  // The elf fuzz target found sh_entsize = 2^64-1: stepping by it wrapped the offset back into
  // (and before) the table. The file is this test binary with its .symtab's sh_entsize changed.
  std::vector<uint8_t> bytes = ReadWholeFile(test::SelfExePath());
  auto le = [&](uint64_t at, int width) {
    uint64_t v = 0;
    for (int b = 0; b < width; ++b) v |= static_cast<uint64_t>(bytes[at + b]) << (8 * b);
    return v;
  };
  const uint64_t shoff = le(40, 8), shnum = le(60, 2);
  uint64_t symtab = 0;
  for (uint64_t i = 0; i < shnum; ++i)
    if (le(shoff + i * 64 + 4, 4) == 2) symtab = shoff + i * 64;  // SHT_SYMTAB
  REQUIRE(symtab != 0);
  const uint64_t table_offset = le(symtab + 24, 8), table_size = le(symtab + 32, 8);
  for (int b = 0; b < 8; ++b) bytes[symtab + 56 + b] = 0xff;
  auto elf = ElfFile::FromBytes(std::move(bytes), "entsize");
  REQUIRE(elf);
  auto symbols = elf->Symbols();
  REQUIRE(!symbols);
  CHECK(symbols.error().code == Errc::kCorrupt);
  char offset_text[32];
  std::snprintf(offset_text, sizeof offset_text, "0x%llx",
                static_cast<unsigned long long>(table_offset));
  CHECK(symbols.error().message == "entsize: symbol entry size 18446744073709551615 at offset " +
                                       std::string(offset_text) + " is larger than its table (" +
                                       std::to_string(table_size) + " bytes)");
}

}  // namespace ptscope::record

namespace ptscope::record {

TEST_CASE("ElfFile never crashes on corrupted headers, program or section tables") {
  std::vector<uint8_t> original = ReadWholeFile("/bin/true");
  REQUIRE(original.size() > 4096);
  auto clean = ElfFile::FromBytes(original, "true");
  REQUIRE(clean);
  // Offsets to damage: the ELF header, the program headers and the section header table.
  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < 64 + 56 * 16 && i < original.size(); ++i) offsets.push_back(i);
  uint64_t shoff = 0;
  for (int b = 0; b < 8; ++b) shoff |= static_cast<uint64_t>(original[40 + b]) << (8 * b);
  for (uint64_t i = shoff; i < shoff + 64 * 8 && i < original.size(); ++i) offsets.push_back(i);
  int parsed = 0, refused = 0;
  for (uint64_t offset : offsets) {
    for (uint8_t value : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x7f}}) {
      if (original[offset] == value) continue;
      std::vector<uint8_t> bytes = original;
      bytes[offset] = value;
      auto elf = ElfFile::FromBytes(std::move(bytes), "damaged");
      if (!elf) {
        ++refused;
        CHECK(!elf.error().message.empty());
        continue;
      }
      ++parsed;
      (void)elf->LoadSegments();
      auto sym = elf->FindSymbol("__libc_start_main");
      if (!sym) CHECK(!sym.error().message.empty());
      auto all = elf->Symbols();
      if (!all) CHECK(!all.error().message.empty());
    }
  }
  CHECK(parsed > 0);
  CHECK(refused > 0);
}

}  // namespace ptscope::record
