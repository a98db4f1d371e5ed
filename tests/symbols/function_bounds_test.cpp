// Names people can trust (issue #27): PLT stubs named from the code file when the symbols come
// from a separate debug file (where .plt is NOBITS), IRELATIVE stubs after their IFUNC, stripped
// functions bounded by their .eh_frame FDE, and the named/unnamed stretches the summary counts.
// Oracles are binutils (objdump, nm, readelf) on names_lib.so and on the system's libc.
#include <doctest/doctest.h>

#include <llvm/Object/ObjectFile.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "function_bounds.h"
#include "ptscope/symbols.h"

namespace ptscope::symbols {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : value;
}

std::string Run(const std::string& command) {
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
    ::pclose(pipe);
  }
  return out;
}

// "ADDRESS <name>:" headers of objdump's disassembly of the PLT sections: address -> name.
std::map<uint64_t, std::string> ObjdumpPlt(const std::string& path) {
  std::map<uint64_t, std::string> stubs;
  std::string out = Run("objdump -d -j .plt -j .plt.got -j .plt.sec '" + path + "' 2>/dev/null");
  std::regex header("^([0-9a-f]+) <(.*)>:$");
  size_t at = 0;
  while (at < out.size()) {
    size_t end = out.find('\n', at);
    if (end == std::string::npos) end = out.size();
    std::smatch m;
    std::string line = out.substr(at, end - at);
    if (std::regex_match(line, m, header)) stubs[std::stoull(m[1], nullptr, 16)] = m[2];
    at = end + 1;
  }
  return stubs;
}

// nm's symbols of `type` (a letter, as nm prints it) at `address`.
std::vector<std::string> NmAt(const std::string& options, const std::string& path,
                              uint64_t address, char type) {
  std::vector<std::string> names;
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "%016llx %c ", static_cast<unsigned long long>(address),
                type);
  static std::map<std::string, std::string> outputs;  // nm runs once per file
  std::string& out = outputs[options + " '" + path + "'"];
  if (out.empty()) out = Run("nm " + options + " '" + path + "'");
  for (size_t at = out.find(prefix); at != std::string::npos; at = out.find(prefix, at + 1)) {
    if (at != 0 && out[at - 1] != '\n') continue;
    size_t end = out.find('\n', at);
    names.push_back(out.substr(at + 19, end - at - 19));
  }
  return names;
}

uint64_t NmAddress(const std::string& path, const std::string& name) {
  std::string out = Run("nm '" + path + "'");
  size_t at = out.find(" " + name + "\n");
  if (at == std::string::npos) return 0;
  size_t line = out.rfind('\n', at);
  line = line == std::string::npos ? 0 : line + 1;
  return std::stoull(out.substr(line, 16), nullptr, 16);
}

// Checks our stubs against objdump's: the same addresses and names, except that for
// "*ABS*+0xADDR@plt" (an IRELATIVE slot) ours must be one of the IFUNC symbols nm finds at ADDR
// in `symbols_from`, and PLT0 (objdump: "first@plt-0x10") is ".plt".
void CheckStubs(const std::vector<PltStub>& stubs, const std::string& code,
                const std::string& nm_options, const std::string& symbols_from) {
  std::map<uint64_t, std::string> ours;
  for (const PltStub& stub : stubs) ours[stub.start] = stub.name;
  std::map<uint64_t, std::string> theirs = ObjdumpPlt(code);
  REQUIRE(!theirs.empty());
  CHECK(ours.size() == theirs.size());
  static const std::regex irelative(R"(\*ABS\*\+0x([0-9a-f]+)@plt)");
  for (auto& [address, name] : theirs) {
    CAPTURE(address);
    CAPTURE(name);
    REQUIRE(ours.count(address) == 1);
    std::smatch m;
    if (std::regex_match(name, m, irelative)) {
      std::vector<std::string> ifuncs =
          NmAt(nm_options, symbols_from, std::stoull(m[1], nullptr, 16), 'i');
      REQUIRE(!ifuncs.empty());
      CHECK(std::find(ifuncs.begin(), ifuncs.end(),
                      ours[address].substr(0, ours[address].size() - 4)) != ifuncs.end());
    } else if (name.find("@plt-0x") != std::string::npos) {
      CHECK(ours[address] == ".plt");
    } else {
      CHECK(ours[address] == name);
    }
  }
}

std::vector<std::string> Names(const std::vector<PltStub>& stubs) {
  std::vector<std::string> names;
  for (const PltStub& stub : stubs) names.push_back(stub.name);
  return names;
}

TEST_CASE("PLT stubs of a library with a separate debug file: JUMP_SLOT, GLOB_DAT, IRELATIVE") {
  std::string stripped = Env("PTSCOPE_NAMES_LIB"), debug = Env("PTSCOPE_NAMES_LIB_DEBUG");
  REQUIRE(!stripped.empty());
  std::vector<PltStub> stubs = LoadPltStubs(stripped, debug);
  CheckStubs(stubs, stripped, "", debug);
  // PLT0, puts, strlen, the IFUNC bump, and __cxa_finalize in .plt.got.
  CHECK(Names(stubs) == std::vector<std::string>{".plt", "puts@plt", "strlen@plt", "bump@plt",
                                                 "__cxa_finalize@plt"});
  // The debug file's .plt is NOBITS: nothing can be read from it.
  CHECK(LoadPltStubs(debug, debug).empty());

  uint64_t puts_stub = 0;
  for (const PltStub& stub : stubs) {
    if (stub.name == "puts@plt") puts_stub = stub.start;
  }
  REQUIRE(puts_stub != 0);
  SUBCASE("the symbolizer reads the stubs from the code file it is told about") {
    Symbolizer symbolizer;
    symbolizer.SetCodeFile(debug, stripped);
    Symbol symbol = symbolizer.Symbolize(debug, puts_stub + 6);
    CHECK(symbol.found);
    CHECK(symbol.function == "puts@plt");
    CHECK(symbol.function_start == puts_stub);
    CHECK(symbolizer.FunctionStart(debug, puts_stub + 11) == puts_stub);
  }
  SUBCASE("told late, it forgets what it read from the debug file") {
    Symbolizer symbolizer;
    CHECK_FALSE(symbolizer.Symbolize(debug, puts_stub + 6).function == "puts@plt");
    symbolizer.SetCodeFile(debug, stripped);
    CHECK(symbolizer.Symbolize(debug, puts_stub + 6).function == "puts@plt");
  }
}

std::string Describe(const std::vector<PltStub>& stubs) {
  std::ostringstream out;
  for (const PltStub& stub : stubs) out << std::hex << stub.start << " " << stub.size << " " << stub.name << "\n";
  return out.str();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_CASE("PLT stubs kept between runs: cold, warm, another debug file, damaged: the same stubs") {
  namespace fs = std::filesystem;
  const std::string code = Env("PTSCOPE_NAMES_LIB"), debug = Env("PTSCOPE_NAMES_LIB_DEBUG");
  REQUIRE(!code.empty());
  std::string dir_pattern = (fs::temp_directory_path() / "plt_cache_test.XXXXXX").string();
  REQUIRE(::mkdtemp(dir_pattern.data()) != nullptr);
  const fs::path dir = dir_pattern;
  SectionCache cache(dir.string());
  auto object = llvm::object::ObjectFile::createObjectFile(code);
  REQUIRE(static_cast<bool>(object));
  const std::string build_id = BuildIdHex(*object->getBinary());
  REQUIRE(build_id.size() == 40);
  const SectionCache::Source code_source = SectionCache::SourceOf(ReadFile(code));
  const SectionCache::Source debug_source = SectionCache::SourceOf(ReadFile(debug));
  const fs::path file = dir / build_id / "table.plt_stubs";
  const std::string uncached = Describe(LoadPltStubs(code, debug));
  CHECK(uncached.find(" bump@plt\n") != std::string::npos);  // an IFUNC named from the debug file
  auto load = [&](SectionCache::Source for_debug) {
    return Describe(LoadPltStubs(code, debug, &cache, build_id, code_source, for_debug));
  };
  CHECK(load(debug_source) == uncached);  // cold: stored
  REQUIRE(fs::is_regular_file(file));
  const std::string kept = ReadFile(file);
  CHECK(load(debug_source) == uncached);  // warm
  CHECK(ReadFile(file) == kept);
  // Warm answers come from the file: a name changed there shows...
  std::string changed = kept;
  const size_t at = changed.find("puts@plt");
  REQUIRE(at != std::string::npos);
  changed[at + 3] = 'z';
  std::ofstream(file, std::ios::binary | std::ios::trunc) << changed;
  CHECK(load(debug_source).find(" putz@plt\n") != std::string::npos);
  // ... but not for another debug file (IFUNC names come from it): read again, file replaced.
  SectionCache::Source other_debug = debug_source;
  other_debug.hash ^= 1;
  CHECK(load(other_debug) == uncached);
  CHECK(load(debug_source) == uncached);
  // Cut short, or another version of the payload (its first byte after the 32-byte header).
  fs::resize_file(file, fs::file_size(file) - 1);
  CHECK(load(debug_source) == uncached);
  CHECK(ReadFile(file) == kept);
  {
    std::fstream bytes(file, std::ios::in | std::ios::out | std::ios::binary);
    bytes.seekp(32);
    bytes.put('\x02');
  }
  CHECK(load(debug_source) == uncached);
  CHECK(ReadFile(file) == kept);
  // The payload reader: every shorter prefix and one byte more are refused.
  const llvm::StringRef payload = llvm::StringRef(kept).drop_front(32);
  REQUIRE(UnpackPltStubs(payload, debug_source).has_value());
  for (size_t size = 0; size < payload.size(); ++size) {
    INFO("cut to " << size);
    REQUIRE_FALSE(UnpackPltStubs(payload.take_front(size), debug_source).has_value());
  }
  CHECK_FALSE(UnpackPltStubs(payload.str() + '\0', debug_source).has_value());
  fs::remove_all(dir);
}

TEST_CASE("the system libc: __tunable_get_val@plt and its IRELATIVE stubs (strlen@plt)") {
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  std::vector<PltStub> stubs = LoadPltStubs(libc, libc);
  CheckStubs(stubs, libc, "-D --without-symbol-versions", libc);
  std::vector<std::string> names = Names(stubs);
  CHECK(std::count(names.begin(), names.end(), "__tunable_get_val@plt") == 1);
  CHECK(std::count(names.begin(), names.end(), "strlen@plt") == 1);
}

TEST_CASE("stripped code: a function is bounded by its FDE, named or not") {
  // Without a .gnu_debuglink (LLVM would follow it to the debug file and name everything).
  std::string stripped = Env("PTSCOPE_NAMES_LIB_BARE"), debug = Env("PTSCOPE_NAMES_LIB_DEBUG");
  uint64_t hidden = NmAddress(debug, "hidden_work"), exported = NmAddress(debug, "exported_work");
  REQUIRE(hidden != 0);
  REQUIRE(exported != 0);
  REQUIRE(NmAddress(stripped, "hidden_work") == 0);  // nm: "no symbols"; dynsym lacks it too
  // readelf's FDE list holds one starting at each function (the oracle for the bounds).
  std::string frames = Run("readelf --debug-dump=frames '" + stripped + "'");
  char pc[48];
  std::snprintf(pc, sizeof pc, "pc=%016llx..", static_cast<unsigned long long>(hidden));
  REQUIRE(frames.find(pc) != std::string::npos);
  uint64_t hidden_end = std::stoull(frames.substr(frames.find(pc) + 21, 16), nullptr, 16);

  std::vector<CodeRange> fdes = LoadFdeRanges(stripped);
  bool found = false;
  for (const CodeRange& r : fdes) found |= r.start == hidden && r.start + r.size == hidden_end;
  CHECK(found);
  CHECK(LoadFdeRanges(debug).empty());  // NOBITS .eh_frame

  Symbolizer symbolizer;
  for (uint64_t inside : {hidden, hidden + 1, hidden_end - 1}) {
    CAPTURE(inside);
    CHECK(symbolizer.FunctionStart(stripped, inside) == hidden);
    Symbol symbol = symbolizer.Symbolize(stripped, inside);
    CHECK_FALSE(symbol.found);
    CHECK(symbol.function_start == hidden);
  }
  NamedStretch unnamed = symbolizer.NamedStretchAt(stripped, hidden + 3);
  CHECK_FALSE(unnamed.named);
  CHECK((unnamed.begin <= hidden && hidden_end <= unnamed.end));
  NamedStretch named = symbolizer.NamedStretchAt(stripped, exported + 1);
  CHECK(named.named);  // exported_work is in .dynsym
  CHECK((named.begin <= exported && exported < named.end));
  CHECK((hidden_end <= named.begin || named.end <= hidden));
  // The same code through the debug file: everything has a symbol.
  Symbolizer with_debug;
  with_debug.SetCodeFile(debug, Env("PTSCOPE_NAMES_LIB"));
  CHECK(with_debug.NamedStretchAt(debug, hidden + 3).named);
  CHECK(with_debug.Symbolize(debug, hidden + 3).function == "hidden_work");
}

}  // namespace
}  // namespace ptscope::symbols
