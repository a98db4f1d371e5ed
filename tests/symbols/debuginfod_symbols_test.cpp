// DebuginfodFetcher (disabled without a URL; file:// trees) and MiniDebugInfo symbolization.
// Oracles: the program's own bytes (fetched copy) and `nm` of the unstripped program.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

#include "ptscope/symbols.h"
#include "minidebuginfo.h"
#include "ptscope/format.h"
#include "ptscope/symbols.h"

using namespace ptscope::symbols;
namespace fs = std::filesystem;

namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  REQUIRE(value != nullptr);
  return value;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct TempDir {
  fs::path path;
  TempDir() {
    char pattern[] = "/tmp/ptscope-debuginfod-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path); }
};

// name -> address from `nm --defined-only` output.
std::map<std::string, uint64_t> ReadNm(const std::string& path) {
  std::map<std::string, uint64_t> symbols;
  std::istringstream in(Slurp(path));
  std::string address, type, name;
  while (in >> address >> type >> name) symbols[name] = std::stoull(address, nullptr, 16);
  return symbols;
}

}  // namespace

TEST_CASE("debuginfod: no URL anywhere -> disabled, the library is never called") {
  unsetenv("DEBUGINFOD_URLS");
  DebuginfodFetcher fetcher = DebuginfodFetcher::FromEnvironment({});
  CHECK(!fetcher.enabled());
  auto result = fetcher.FetchExecutable({0x12, 0x34});
  REQUIRE(!result);
  CHECK(result.error().code == ptscope::Errc::kNotFound);
  CHECK(result.error().message ==
        "debuginfod: no server configured (set DEBUGINFOD_URLS or pass --debuginfod URL)");
  CHECK(fetcher.library_calls() == 0);
  setenv("DEBUGINFOD_URLS", "  ", 1);
  CHECK(!DebuginfodFetcher::FromEnvironment({}).enabled());
  setenv("DEBUGINFOD_URLS", "http://127.0.0.1:1/", 1);
  CHECK(DebuginfodFetcher::FromEnvironment({}).urls() == "http://127.0.0.1:1/");
  CHECK(DebuginfodFetcher::FromEnvironment({{"file:///x"}, 5}).urls() == "file:///x");
  unsetenv("DEBUGINFOD_URLS");
}

TEST_CASE("debuginfod: a file:// tree serves the executable; a missing debuginfo is asked once") {
  const std::string program = Env("PTSCOPE_DEBUGINFOD_PROG");
  auto elf = ReadElfInfo(program);
  REQUIRE(elf);
  REQUIRE(!elf->build_id.empty());
  const std::string hex = ptscope::format::ToHex(elf->build_id);
  TempDir dir;
  fs::create_directories(dir.path / "tree/buildid" / hex);
  fs::copy_file(program, dir.path / "tree/buildid" / hex / "executable");
  setenv("DEBUGINFOD_CACHE_PATH", (dir.path / "cache").c_str(), 1);
  unsetenv("DEBUGINFOD_URLS");
  DebuginfodFetcher fetcher({{"file://" + (dir.path / "tree").string()}, 10});
  REQUIRE(fetcher.enabled());
  auto path = fetcher.FetchExecutable(elf->build_id);
  REQUIRE_MESSAGE(path, path.error().message);
  CHECK(path->rfind((dir.path / "cache").string(), 0) == 0);  // served from the cache
  CHECK(Slurp(*path) == Slurp(program));
  auto debug = fetcher.FetchDebugInfo(elf->build_id);
  REQUIRE(!debug);
  CHECK(debug.error().code == ptscope::Errc::kNotFound);
  CHECK(fetcher.library_calls() == 2);
  debug = fetcher.FetchDebugInfo(elf->build_id);
  REQUIRE(!debug);
  CHECK(debug.error().message ==
        "debuginfod: debuginfo of build id " + hex + " not found (asked before)");
  CHECK(fetcher.library_calls() == 2);
  CHECK(std::getenv("DEBUGINFOD_URLS") == nullptr);  // the environment is restored
  unsetenv("DEBUGINFOD_CACHE_PATH");
}

TEST_CASE("MiniDebugInfo: .gnu_debugdata names functions of a fully stripped binary") {
  const std::string mini = Env("PTSCOPE_MINIDEBUGINFO_PROG");
  std::map<std::string, uint64_t> nm = ReadNm(Env("PTSCOPE_MINIDEBUGINFO_NM"));
  REQUIRE(nm.count("PlainC") == 1);
  REQUIRE(nm.count("_ZN4mini5TwiceEi") == 1);
  auto inflated = ReadMiniDebugInfo(mini);
  REQUIRE(inflated);
  REQUIRE(inflated->size() > 4);
  CHECK(std::string(inflated->begin(), inflated->begin() + 4) == "\x7f" "ELF");
  auto none = ReadMiniDebugInfo(Env("PTSCOPE_DEBUGINFOD_PROG"));
  REQUIRE(!none);
  CHECK(none.error().code == ptscope::Errc::kNotFound);

  MiniDebugInfoSymbolizer symbolizer;
  CHECK(symbolizer.Has(mini));
  CHECK(!symbolizer.Has(Env("PTSCOPE_DEBUGINFOD_PROG")));
  MiniSymbol plain = symbolizer.Symbolize(mini, nm["PlainC"] + 1);
  CHECK(plain.found);
  CHECK(plain.function == "PlainC");
  CHECK(plain.function_start == nm["PlainC"]);
  MiniSymbol twice = symbolizer.Symbolize(mini, nm["_ZN4mini5TwiceEi"]);
  CHECK(twice.found);
  CHECK(twice.function == "mini::Twice(int)");
  CHECK(twice.function_start == nm["_ZN4mini5TwiceEi"]);
}
