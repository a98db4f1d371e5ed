// MakeLazyDwarfContext and SectionCache: the lazily read context answers exactly as LLVM's own
// DWARFContext::create, over the test program and over a copy whose debug sections are
// zlib-compressed (objcopy); the cache stores what was decompressed, serves it next time, and
// replaces a stale file; it refuses a directory others may write to.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <llvm/DebugInfo/DWARF/DWARFContext.h>
#include <llvm/Object/BuildID.h>
#include <llvm/Object/ELFObjectFile.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "lazy_dwarf.h"
#include "object_helpers.h"
#include "ptscope/symbols.h"
#include "section_cache.h"

namespace ptscope::symbols {
namespace {
namespace fs = std::filesystem;
using testing::Env;
using testing::Open;
using testing::TextRange;
using testing::TempDir;

void Quiet(llvm::Error error) { llvm::consumeError(std::move(error)); }

std::string Describe(const llvm::DIInliningInfo& info) {
  std::string text;
  for (uint32_t i = 0; i < info.getNumberOfFrames(); ++i) {
    const llvm::DILineInfo& frame = info.getFrame(i);
    text += frame.FunctionName + "@" + frame.FileName + ":" + std::to_string(frame.Line) + ":" +
            std::to_string(frame.Column) + " ";
  }
  return text;
}

// Every address of .text: inlined frames, names, files and lines from both contexts.
size_t CompareEverywhere(llvm::DWARFContext& expected, llvm::DWARFContext& actual,
                         std::pair<uint64_t, uint64_t> text) {
  llvm::DILineInfoSpecifier spec(
      llvm::DILineInfoSpecifier::FileLineInfoKind::AbsoluteFilePath,
      llvm::DILineInfoSpecifier::FunctionNameKind::LinkageName);
  size_t inlined = 0;
  for (uint64_t at = text.first; at < text.second; ++at) {
    llvm::object::SectionedAddress address{at, llvm::object::SectionedAddress::UndefSection};
    std::string want = Describe(expected.getInliningInfoForAddress(address, spec));
    std::string got = Describe(actual.getInliningInfoForAddress(address, spec));
    INFO("at 0x" << std::hex << at);
    REQUIRE(got == want);
    if (expected.getInliningInfoForAddress(address, spec).getNumberOfFrames() > 1) ++inlined;
  }
  return inlined;
}

std::set<std::string> Files(const fs::path& dir) {
  std::set<std::string> names;
  if (!fs::exists(dir)) return names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename());
  return names;
}

TEST_CASE("lazy DWARF context: the same answers as LLVM's, compressed sections or not") {
  auto plain = Open(Env("PTSCOPE_SYMBOLS_PROG"));
  auto compressed = Open(Env("PTSCOPE_SYMBOLS_PROG_ZLIB"));
  // The copy really is compressed (else this test would prove nothing about decompression).
  bool any_compressed = false;
  for (const llvm::object::SectionRef& section : compressed.getBinary()->sections()) {
    any_compressed |= section.isCompressed();
  }
  REQUIRE(any_compressed);
  auto text = TextRange(*plain.getBinary());
  REQUIRE(text == TextRange(*compressed.getBinary()));
  auto reference = llvm::DWARFContext::create(*plain.getBinary(),
      llvm::DWARFContext::ProcessDebugRelocations::Process, nullptr, "", Quiet, Quiet);
  auto lazy_plain = MakeLazyDwarfContext(*plain.getBinary(), nullptr, Quiet);
  auto lazy_compressed = MakeLazyDwarfContext(*compressed.getBinary(), nullptr, Quiet);
  size_t inlined = CompareEverywhere(*reference, *lazy_plain, text);
  CHECK(inlined > 0);  // the always_inline helper: frames below the function are compared too
  CHECK(CompareEverywhere(*reference, *lazy_compressed, text) == inlined);
}

TEST_CASE("section cache: stores what was decompressed, serves it, replaces a stale file") {
  TempDir temp("lazy_dwarf_test");
  SectionCache cache((temp.path / "cache").string());
  fs::create_directory(temp.path / "cache", temp.path);
  fs::permissions(temp.path / "cache", fs::perms::owner_all);
  auto plain = Open(Env("PTSCOPE_SYMBOLS_PROG"));
  auto compressed = Open(Env("PTSCOPE_SYMBOLS_PROG_ZLIB"));
  auto reference = llvm::DWARFContext::create(*plain.getBinary(),
      llvm::DWARFContext::ProcessDebugRelocations::Process, nullptr, "", Quiet, Quiet);
  auto text = TextRange(*plain.getBinary());
  llvm::object::BuildIDRef id = llvm::object::getBuildID(compressed.getBinary());
  REQUIRE(id.size() == 20);
  std::string hex;
  for (uint8_t byte : id) hex += "0123456789abcdef"[byte >> 4], hex += "0123456789abcdef"[byte & 15];
  const fs::path module_dir = temp.path / "cache" / hex;

  // Nothing is decompressed until LLVM asks.
  auto first = MakeLazyDwarfContext(*compressed.getBinary(), &cache, Quiet);
  CHECK(Files(module_dir).empty());
  CompareEverywhere(*reference, *first, text);
  std::set<std::string> stored = Files(module_dir);
  CHECK(stored.count("debug_info") == 1);
  CHECK(stored.count("debug_line") == 1);
  CHECK(stored.count("debug_abbrev") == 1);
  for (const std::string& name : stored) CHECK(name.rfind(".tmp", 0) != 0);  // no leftovers
  CHECK((fs::status(module_dir).permissions() & fs::perms::all) == fs::perms::owner_all);
  CHECK((fs::status(module_dir / "debug_info").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));
  struct stat before;
  REQUIRE(::stat((module_dir / "debug_info").c_str(), &before) == 0);

  // A second context maps the files: none is rewritten (same inode), same answers.
  auto second = MakeLazyDwarfContext(*compressed.getBinary(), &cache, Quiet);
  CompareEverywhere(*reference, *second, text);
  struct stat after;
  REQUIRE(::stat((module_dir / "debug_info").c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);
  CHECK(Files(module_dir) == stored);

  // A file whose header no longer matches the section (here: its hash) is not used; the section
  // is decompressed again and the file replaced.
  {
    std::fstream file(module_dir / "debug_info", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(16);
    file.put('\x5a');
  }
  auto third = MakeLazyDwarfContext(*compressed.getBinary(), &cache, Quiet);
  CompareEverywhere(*reference, *third, text);
  struct stat replaced;
  REQUIRE(::stat((module_dir / "debug_info").c_str(), &replaced) == 0);
  CHECK(replaced.st_ino != after.st_ino);
  REQUIRE(cache.Find(hex, ".debug_info", "not the section's bytes") == std::nullopt);
}

// Every answer of a fresh Symbolizer that comes from a file's symbol tables and FDE ranges, over
// its .text.
std::string Answers(const std::string& path) {
  auto binary = Open(path);
  auto text = TextRange(*binary.getBinary());
  Symbolizer symbolizer;
  std::ostringstream out;
  for (uint64_t at = text.first; at < text.second; ++at) {
    NamedStretch stretch = symbolizer.NamedStretchAt(path, at);
    auto range = symbolizer.FunctionRange(path, at);
    out << std::hex << at << " " << symbolizer.FunctionStart(path, at) << " [" << range.first
        << "," << range.second << ") " << stretch.begin << "-" << stretch.end
        << (stretch.named ? " named\n" : "\n");
  }
  return out.str();
}

struct stat StatOf(const fs::path& path) {
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st;
}

// A file of the cache whose recorded hash is changed, as if it came from another file.
void Spoil(const fs::path& path) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(16);
  file.put('\x5a');
}

// `table` of `path`'s module, uncached, cold (computed, stored), warm (read back, not rewritten)
// and stale (computed again, replaced): the same answers each time.
void CheckTable(const std::string& path, const fs::path& cache, const std::string& table) {
  CAPTURE(path);
  const fs::path file = cache / BuildIdHex(*Open(path).getBinary()) / table;
  REQUIRE(BuildIdHex(*Open(path).getBinary()).size() == 40);
  ::setenv("PTSCOPE_DEBUG_CACHE", "off", 1);
  const std::string uncached = Answers(path);
  CHECK(uncached.find(" named") != std::string::npos);
  CHECK(uncached.find(" 0 [0,0) ") != std::string::npos);  // not everything is inside a function
  ::setenv("PTSCOPE_DEBUG_CACHE", cache.c_str(), 1);
  CHECK(Answers(path) == uncached);
  REQUIRE(fs::is_regular_file(file));
  CHECK((StatOf(file).st_mode & 0777) == 0600);
  const ino_t cold = StatOf(file).st_ino;
  CHECK(Answers(path) == uncached);
  CHECK(StatOf(file).st_ino == cold);
  Spoil(file);
  CHECK(Answers(path) == uncached);
  const ino_t respoiled = StatOf(file).st_ino;
  CHECK(respoiled != cold);
  // Cut short (a full disk, a copy stopped half-way): computed again and replaced.
  fs::resize_file(file, fs::file_size(file) - 8);
  CHECK(Answers(path) == uncached);
  const ino_t recut = StatOf(file).st_ino;
  CHECK(recut != respoiled);
  // Another format (its magic, the first 8 bytes, changed): the same.
  {
    std::fstream bytes(file, std::ios::in | std::ios::out | std::ios::binary);
    bytes.put('\x00');
  }
  CHECK(Answers(path) == uncached);
  CHECK(StatOf(file).st_ino != recut);
  // Gone: computed and stored again.
  fs::remove(file);
  CHECK(Answers(path) == uncached);
  CHECK(fs::is_regular_file(file));
}

TEST_CASE("section cache: symbol tables and FDE ranges, cold, warm and stale, answer the same") {
  TempDir temp("lazy_dwarf_test");
  const char* old = std::getenv("PTSCOPE_DEBUG_CACHE");
  std::string saved = old != nullptr ? old : "";
  // Functions bounded by the symbol table...
  CheckTable(Env("PTSCOPE_SYMBOLS_PROG"), temp.path / "cache", "table.symbols");
  // ... and, in a library stripped of its symbol table, by the FDEs of its .eh_frame.
  CheckTable(Env("PTSCOPE_NAMES_LIB_BARE"), temp.path / "cache", "table.fde_ranges");
  if (old != nullptr) {
    ::setenv("PTSCOPE_DEBUG_CACHE", saved.c_str(), 1);
  } else {
    ::unsetenv("PTSCOPE_DEBUG_CACHE");
  }
}

TEST_CASE("section cache: the directory from the environment, private or not at all") {
  TempDir temp("lazy_dwarf_test");
  const char* old = std::getenv("PTSCOPE_DEBUG_CACHE");
  std::string saved = old != nullptr ? old : "";
  fs::path dir = temp.path / "made" / "here";
  ::setenv("PTSCOPE_DEBUG_CACHE", dir.c_str(), 1);
  SectionCache made = SectionCache::FromEnvironment();
  CHECK(made.enabled());
  CHECK(made.dir() == dir.string());
  CHECK((fs::status(dir).permissions() & fs::perms::all) == fs::perms::owner_all);
  // Others may write to it: someone could plant DWARF there.
  fs::permissions(dir, fs::perms::group_write, fs::perm_options::add);
  CHECK_FALSE(SectionCache::FromEnvironment().enabled());
  ::setenv("PTSCOPE_DEBUG_CACHE", "off", 1);
  CHECK_FALSE(SectionCache::FromEnvironment().enabled());
  // An executable stripped of every symbol: both of its cached tables are empty (two zero
  // counts), and reading them back must copy nothing (the sanitizer build once found memcpy
  // given an empty vector's null data() here, decoding a capture of gzip).
  const std::string bare = Env("PTSCOPE_SYMBOLS_PROG_BARE");
  const fs::path bare_tables =
      temp.path / "cache" / BuildIdHex(*Open(bare).getBinary()) / "table.symbols";
  ::setenv("PTSCOPE_DEBUG_CACHE", "off", 1);
  const std::string uncached = Answers(bare);
  CHECK(uncached.find(" named") == std::string::npos);
  ::setenv("PTSCOPE_DEBUG_CACHE", (temp.path / "cache").c_str(), 1);
  CHECK(Answers(bare) == uncached);
  REQUIRE(fs::is_regular_file(bare_tables));
  CHECK(Answers(bare) == uncached);
  CHECK(StatOf(bare_tables).st_size == static_cast<off_t>(32 + 2 * sizeof(uint64_t)));
  if (old != nullptr) {
    ::setenv("PTSCOPE_DEBUG_CACHE", saved.c_str(), 1);
  } else {
    ::unsetenv("PTSCOPE_DEBUG_CACHE");
  }
}

}  // namespace
}  // namespace ptscope::symbols
