// DwarfAnswers: the Symbolizer's answers from DWARF (inlined depths, names, files, lines, inlined
// frames) kept per debug file are the answers it gives without them, at every address of .text:
// uncached, cold, warm, filled in two runs, and after the kept file was damaged, cut short, of
// another version or gone. A warm run answers from the file (a name changed in it shows), and the
// payload reader takes only a whole, valid payload.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dwarf_answers.h"
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

// Restores PTSCOPE_DEBUG_CACHE as the test found it.
struct CacheEnv {
  const char* old = std::getenv("PTSCOPE_DEBUG_CACHE");
  std::string saved = old != nullptr ? old : "";
  void Set(const std::string& value) { ::setenv("PTSCOPE_DEBUG_CACHE", value.c_str(), 1); }
  ~CacheEnv() {
    if (old != nullptr) {
      ::setenv("PTSCOPE_DEBUG_CACHE", saved.c_str(), 1);
    } else {
      ::unsetenv("PTSCOPE_DEBUG_CACHE");
    }
  }
};

// Every DWARF answer of a fresh Symbolizer at every `step`-th address of .text (from `first`):
// the inlined depth of InlineDepths' span, and Symbolize's name, start, file, line and inlined
// frames.
std::string Answers(const std::string& path, uint64_t step = 1, uint64_t first = 0) {
  const auto text = TextRange(*Open(path).getBinary());
  Symbolizer symbolizer;
  std::ostringstream out;
  for (uint64_t at = text.first + first; at < text.second; at += step) {
    std::shared_ptr<const InlineDepthSpan> span = symbolizer.InlineDepths(path, at);
    Symbol symbol = symbolizer.Symbolize(path, at);
    out << std::hex << at << " depth " << (span ? std::to_string(span->DepthAt(at)) : "-") << " "
        << symbol.found << " " << symbol.function << " " << symbol.function_start << " "
        << symbol.file << ":" << std::dec << symbol.line;
    for (const SourceFrame& frame : symbol.inlined) {
      out << " | " << frame.function << " " << frame.file << ":" << frame.line;
    }
    out << "\n";
  }
  return out.str();
}

struct stat StatOf(const fs::path& path) {
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st;
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void WriteAll(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void CheckModule(const std::string& path, const fs::path& cache, CacheEnv& env) {
  CAPTURE(path);
  const std::string build_id = BuildIdHex(*Open(path).getBinary());
  REQUIRE(build_id.size() == 40);
  const fs::path file = cache / build_id / "table.dwarf_answers";
  env.Set("off");
  const std::string uncached = Answers(path);
  // The answers compared hold inlined frames, names with lines, and addresses of no function.
  CHECK(uncached.find(" | ") != std::string::npos);
  CHECK(uncached.find("depth 1 ") != std::string::npos);
  CHECK(uncached.find("depth 0 1 main ") != std::string::npos);
  const std::string uncached_half = Answers(path, 2);
  env.Set(cache.string());
  fs::remove_all(cache);
  // Filled lazily, in two runs: every other address, then all of them.
  CHECK(Answers(path, 2) == uncached_half);
  REQUIRE(fs::is_regular_file(file));
  CHECK((StatOf(file).st_mode & 0777) == 0600);
  const auto half = fs::file_size(file);
  const ino_t halfway = StatOf(file).st_ino;
  CHECK(Answers(path) == uncached);  // cold for the other half
  CHECK(StatOf(file).st_ino != halfway);
  CHECK(fs::file_size(file) > half);
  // Warm: every answer kept, nothing added, the file not written again.
  const ino_t cold = StatOf(file).st_ino;
  CHECK(Answers(path) == uncached);
  CHECK(StatOf(file).st_ino == cold);
  // The warm run answers from the file: the name main changed there shows.
  {
    const std::string kept = ReadAll(file);
    std::string changed = kept;
    size_t at = changed.find(std::string("\x04\0\0\0\0\0\0\0main", 12));
    REQUIRE(at != std::string::npos);
    changed.replace(at + 8, 4, "mAin");
    WriteAll(file, changed);
    CHECK(Answers(path).find("depth 0 1 mAin ") != std::string::npos);
    WriteAll(file, kept);
    CHECK(Answers(path) == uncached);
  }
  // Another debug file (its hash in the header changed): computed again and replaced.
  {
    std::fstream bytes(file, std::ios::in | std::ios::out | std::ios::binary);
    bytes.seekp(16);
    bytes.put('\x5a');
  }
  const ino_t spoiled = StatOf(file).st_ino;
  CHECK(Answers(path) == uncached);
  CHECK(StatOf(file).st_ino != spoiled);
  // Cut short (a full disk, a copy stopped half-way): the same.
  fs::resize_file(file, fs::file_size(file) - 8);
  const ino_t cut = StatOf(file).st_ino;
  CHECK(Answers(path) == uncached);
  CHECK(StatOf(file).st_ino != cut);
  // Another version of the payload (its first uint64, after the 32-byte header): the same.
  {
    std::fstream bytes(file, std::ios::in | std::ios::out | std::ios::binary);
    bytes.seekp(32);
    bytes.put('\x02');
  }
  const ino_t versioned = StatOf(file).st_ino;
  CHECK(Answers(path) == uncached);
  CHECK(StatOf(file).st_ino != versioned);
  // Gone: stored again.
  fs::remove(file);
  CHECK(Answers(path) == uncached);
  CHECK(fs::is_regular_file(file));
  CHECK(Answers(path) == uncached);
}

TEST_CASE("DWARF answers: kept per debug file, cold, warm, lazily filled and damaged, answer the same") {
  TempDir temp("dwarf_answers_test");
  CacheEnv env;
  CheckModule(Env("PTSCOPE_SYMBOLS_PROG"), temp.path / "cache", env);
  // ... also when the debug sections are compressed (as distributions ship them).
  CheckModule(Env("PTSCOPE_SYMBOLS_PROG_ZLIB"), temp.path / "cache", env);
}

TEST_CASE("DWARF answers: the payload reader takes a whole, valid payload only") {
  TempDir temp("dwarf_answers_test");
  CacheEnv env;
  const std::string path = Env("PTSCOPE_SYMBOLS_PROG");
  const fs::path cache = temp.path / "cache";
  env.Set(cache.string());
  Answers(path);
  const std::string build_id = BuildIdHex(*Open(path).getBinary());
  const std::string payload = ReadAll(cache / build_id / "table.dwarf_answers").substr(32);
  DwarfAnswers answers(nullptr, "", {});
  REQUIRE(answers.Unpack(payload));
  CHECK(answers.spans() > 1);
  CHECK(answers.addresses() > 1);
  CHECK(answers.Pack() == payload);  // read back exactly
  // Every shorter prefix, and one byte more, is refused and leaves nothing.
  for (size_t size = 0; size < payload.size(); ++size) {
    DwarfAnswers cut(nullptr, "", {});
    INFO("cut to " << size << " of " << payload.size());
    REQUIRE_FALSE(cut.Unpack(llvm::StringRef(payload).take_front(size)));
    REQUIRE(cut.spans() == 0);
    REQUIRE(cut.addresses() == 0);
  }
  CHECK_FALSE(answers.Unpack(payload + '\0'));
  CHECK(answers.Pack() == payload);  // a refused payload keeps what was there
  // A span whose steps are out of order (the first span's first step moved past its end).
  std::string unsorted = payload;
  unsorted[8 * 5] = '\xff';
  unsorted[8 * 5 + 7] = '\x7f';
  CHECK_FALSE(DwarfAnswers(nullptr, "", {}).Unpack(unsorted));
}

}  // namespace
}  // namespace ptscope::symbols
