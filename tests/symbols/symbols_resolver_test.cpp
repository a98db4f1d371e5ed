// ModuleResolver (build-id dirs, plain dirs, a rebuilt binary refused, stripped binary + .debug)
// and Symbolizer (demangled C++ name, inlined frames, function starts) on real test binaries.
// Oracles are binutils (readelf, nm), not the code under test.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "ptscope/symbols.h"

namespace ptscope::symbols {
namespace {
namespace fs = std::filesystem;

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

// The build id as readelf prints it.
std::string ReadelfBuildId(const std::string& path) {
  std::string out = Run("readelf -n '" + path + "'");
  size_t at = out.find("Build ID: ");
  if (at == std::string::npos) return {};
  size_t end = out.find('\n', at);
  return out.substr(at + 10, end - at - 10);
}

// The ELF header's entry point as readelf prints it ("Entry point address: 0x..."), 0 if none.
uint64_t ReadelfEntry(const std::string& path) {
  std::string out = Run("readelf -h '" + path + "'");
  size_t at = out.find("Entry point address:");
  if (at == std::string::npos) return 0;
  return std::strtoull(out.c_str() + at + 20, nullptr, 16);
}

// Address of a symbol as nm prints it (exact name match on the demangled form).
uint64_t NmAddress(const std::string& path, const std::string& name) {
  std::string out = Run("nm -C '" + path + "'");
  size_t at = out.find(" " + name + "\n");
  if (at == std::string::npos) return 0;
  size_t line = out.rfind('\n', at);
  line = line == std::string::npos ? 0 : line + 1;
  return std::stoull(out.substr(line, 16), nullptr, 16);
}

std::vector<uint8_t> Bytes(const std::string& hex) { return format::FromHex(hex).value_or(std::vector<uint8_t>{}); }

struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/ptscope-symbols-test-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST_CASE("ELF facts of the test binary match readelf") {
  std::string prog = Env("PTSCOPE_SYMBOLS_PROG");
  REQUIRE(!prog.empty());
  Result<ElfInfo> elf = ReadElfInfo(prog);
  REQUIRE(elf.has_value());
  CHECK(format::ToHex(elf->build_id) == ReadelfBuildId(prog));
  CHECK(elf->build_id.size() == 20);
  CHECK(elf->has_symtab);
  CHECK(elf->has_debug_info);
  CHECK_FALSE(elf->code_is_nobits);
  CHECK(elf->entry != 0);
  CHECK(elf->entry == ReadelfEntry(prog));
  CHECK(elf->entry == NmAddress(prog, "_start"));
  CHECK(ReadElfInfo("/etc/passwd").error().code == Errc::kBadMagic);
}

TEST_CASE("ELF facts: a note segment whose size wraps past the file is refused by name") {
  // The elf fuzz target's input: LLVM's getBuildID bound check (p_offset + p_filesz) wrapped and
  // it read far outside the file. Here: the test binary with its first PT_NOTE's p_filesz patched.
  std::string prog = Env("PTSCOPE_SYMBOLS_PROG");
  REQUIRE(!prog.empty());
  std::vector<uint8_t> bytes;
  {
    FILE* in = std::fopen(prog.c_str(), "rb");
    REQUIRE(in != nullptr);
    uint8_t buffer[65536];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, in)) > 0) bytes.insert(bytes.end(), buffer, buffer + n);
    std::fclose(in);
  }
  auto le = [&](uint64_t at, int width) {
    uint64_t v = 0;
    for (int b = 0; b < width; ++b) v |= static_cast<uint64_t>(bytes[at + b]) << (8 * b);
    return v;
  };
  const uint64_t phoff = le(32, 8), phnum = le(56, 2);
  uint64_t index = phnum;
  for (uint64_t i = 0; i < phnum && index == phnum; ++i)
    if (le(phoff + i * 56, 4) == 4) index = i;  // PT_NOTE
  REQUIRE(index < phnum);
  const uint64_t header = phoff + index * 56, offset = le(header + 8, 8);
  const uint64_t wrapping = ~uint64_t{0} - 73;  // offset + size wraps to below the file size
  for (int b = 0; b < 8; ++b) bytes[header + 32 + b] = static_cast<uint8_t>(wrapping >> (8 * b));
  TempDir dir;
  const std::string damaged = (dir.path / "note-wraps").string();
  {
    FILE* out = std::fopen(damaged.c_str(), "wb");
    REQUIRE(out != nullptr);
    REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), out) == bytes.size());
    std::fclose(out);
  }
  Result<ElfInfo> elf = ReadElfInfo(damaged);
  REQUIRE(!elf.has_value());
  CHECK(elf.error().code == Errc::kCorrupt);
  CHECK(elf.error().message == damaged + ": note segment (program header " + std::to_string(index) +
                                   ") at offset " + std::to_string(offset) + ", " +
                                   std::to_string(wrapping) + " bytes, lies beyond the " +
                                   std::to_string(bytes.size()) + "-byte file");
}

// zlib's CRC-32 of a file, computed by python (the oracle), as "0x%08x".
std::string PythonCrc32(const std::string& path) {
  std::string out = Run("python3 -c 'import sys,zlib; print(\"0x%08x\" % zlib.crc32(open(sys.argv[1],\"rb\").read()))' '" + path + "'");
  return out.substr(0, out.find('\n'));
}

TEST_CASE("resolver: .gnu_debuglink beside the binary and in .debug/, CRC-32 checked") {
  std::string prog = Env("PTSCOPE_SYMBOLS_PROG");
  std::vector<uint8_t> id = Bytes(ReadelfBuildId(prog));
  REQUIRE(id.size() == 20);
  TempDir dir;
  std::string debug = (dir.path / "prog.debug").string();
  std::string app = (dir.path / "app").string();
  REQUIRE(std::system(("objcopy --only-keep-debug '" + prog + "' '" + debug + "'").c_str()) == 0);
  REQUIRE(std::system(("objcopy --strip-all --add-gnu-debuglink='" + debug + "' '" + prog + "' '" +
                       app + "'").c_str()) == 0);
  std::string link_crc = PythonCrc32(debug);
  REQUIRE(link_crc.size() == 10);

  Result<ElfInfo> elf = ReadElfInfo(app);
  REQUIRE(elf.has_value());
  CHECK(elf->debuglink == "prog.debug");
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", elf->debuglink_crc);
  CHECK(std::string(text) == link_crc);

  SUBCASE("beside the binary") {
    ModuleResolver resolver({});
    const ModuleFiles& files = resolver.Resolve(app, id);
    CHECK(files.code_path == app);
    CHECK(files.debug_path == debug);
    CHECK(files.debug_origin == ".gnu_debuglink");
    CHECK(files.dwp_path.empty());
    CHECK(resolver.notes().empty());
  }
  SUBCASE("in the .debug subdirectory") {
    fs::create_directories(dir.path / ".debug");
    fs::rename(debug, dir.path / ".debug" / "prog.debug");
    ModuleResolver resolver({});
    CHECK(resolver.Resolve(app, id).debug_path == (dir.path / ".debug" / "prog.debug").string());
  }
  SUBCASE("a debug file whose CRC-32 differs is refused with a note") {
    // Same build id, one byte appended: only the CRC tells the file changed.
    REQUIRE(std::system(("printf x >> '" + debug + "'").c_str()) == 0);
    std::string changed_crc = PythonCrc32(debug);
    REQUIRE(changed_crc != link_crc);
    ModuleResolver resolver({});
    const ModuleFiles& files = resolver.Resolve(app, id);
    CHECK(files.debug_path == app);
    CHECK(files.debug_origin == "code file");
    REQUIRE(resolver.notes().size() == 1);
    CHECK(resolver.notes()[0] == "stale debug file " + debug + ": CRC-32 " + changed_crc +
                                     ", but .gnu_debuglink in " + app + " wants " + link_crc +
                                     "; not used");
  }
}

TEST_CASE("resolver: recorded path, build-id dir, plain dir, rebuilt binary refused") {
  std::string prog = Env("PTSCOPE_SYMBOLS_PROG");
  std::string prog2 = Env("PTSCOPE_SYMBOLS_PROG_V2");
  std::string hex = ReadelfBuildId(prog);
  std::string hex2 = ReadelfBuildId(prog2);
  REQUIRE(hex.size() == 40);
  REQUIRE(hex != hex2);
  std::vector<uint8_t> id = Bytes(hex);

  SUBCASE("the recorded path when its build id matches") {
    ModuleResolver resolver({});
    const ModuleFiles& files = resolver.Resolve(prog, id);
    CHECK(files.code_path == prog);
    CHECK(files.debug_path == prog);
    CHECK(files.code_origin == "recorded path");
    CHECK(files.debug_origin == "code file");
  }
  SUBCASE("a rebuilt binary at the recorded path is refused and reported") {
    ModuleResolver resolver({});
    const ModuleFiles& files = resolver.Resolve(prog2, id);
    CHECK(files.code_path.empty());
    REQUIRE(resolver.notes().size() == 1);
    CHECK(resolver.notes()[0] ==
          "refused " + prog2 + ": build id " + hex2 + ", but the capture recorded build id " + hex +
              " for it (a rebuilt binary: its addresses do not match)");
  }
  SUBCASE("a file in --symbols named like the module but of another build is reported") {
    TempDir dir;
    fs::copy_file(prog2, dir.path / "prog");
    ModuleResolver resolver({dir.path.string()});
    const ModuleFiles& files = resolver.Resolve("/gone/prog", id);
    CHECK(files.code_path.empty());
    REQUIRE(resolver.notes().size() == 1);
    CHECK(resolver.notes()[0] == "refused " + (dir.path / "prog").string() + ": build id " + hex2 +
                                     ", but the capture's /gone/prog has build id " + hex +
                                     " (another build: its addresses do not match)");
  }
  SUBCASE("a stripped binary's debug file of another build in --symbols is reported") {
    TempDir dir;
    std::string app = (dir.path / "app").string();
    REQUIRE(std::system(("objcopy --strip-all '" + prog + "' '" + app + "'").c_str()) == 0);
    fs::create_directories(dir.path / "syms");
    REQUIRE(std::system(("objcopy --only-keep-debug '" + prog2 + "' '" +
                         (dir.path / "syms" / "app.debug").string() + "'").c_str()) == 0);
    ModuleResolver resolver({(dir.path / "syms").string()});
    const ModuleFiles& files = resolver.Resolve(app, id);
    CHECK(files.code_path == app);
    CHECK(files.debug_path == app);
    REQUIRE(resolver.notes().size() == 1);
    CHECK(resolver.notes()[0] == "refused " + (dir.path / "syms" / "app.debug").string() +
                                     ": build id " + hex2 + ", but the capture's " + app +
                                     " has build id " + hex +
                                     " (another build: its addresses do not match)");
  }
  SUBCASE(".build-id layout: stripped binary + .debug from different files") {
    TempDir dir;
    fs::create_directories(dir.path / ".build-id" / hex.substr(0, 2));
    std::string base = (dir.path / ".build-id" / hex.substr(0, 2) / hex.substr(2)).string();
    REQUIRE(std::system(("objcopy --only-keep-debug '" + prog + "' '" + base + ".debug'").c_str()) == 0);
    REQUIRE(std::system(("objcopy --strip-all '" + prog + "' '" + base + "'").c_str()) == 0);
    ModuleResolver resolver({dir.path.string()});
    const ModuleFiles& files = resolver.Resolve("/nonexistent/app", id);
    CHECK(files.code_path == base);
    CHECK(files.debug_path == base + ".debug");
    CHECK(files.code_origin == "--symbols " + dir.path.string());
    CHECK(files.debug_origin == "--symbols " + dir.path.string());
    CHECK_FALSE(files.code_elf.has_symtab);

    Symbolizer symbolizer;
    uint64_t outer = NmAddress(prog, "OuterFunction");
    REQUIRE(outer != 0);
    Symbol symbol = symbolizer.Symbolize(files.debug_path, outer + 1);
    CHECK(symbol.found);
    CHECK(symbol.function == "OuterFunction");
    CHECK(symbol.function_start == outer);
    CHECK_FALSE(symbolizer.Symbolize(files.code_path, outer).found);  // stripped: no names
  }
  SUBCASE("plain directory scanned once, indexed by build id; other builds ignored") {
    TempDir dir;
    fs::create_directories(dir.path / "sub");
    fs::copy_file(prog2, dir.path / "app-v2");
    fs::copy_file(prog, dir.path / "sub" / "renamed");
    ModuleResolver resolver({dir.path.string()});
    const ModuleFiles& files = resolver.Resolve("/nonexistent/app", id);
    CHECK(files.code_path == (dir.path / "sub" / "renamed").string());
    CHECK(files.debug_origin == "code file");
    CHECK(resolver.Resolve("/nonexistent/other", Bytes(std::string(40, 'a'))).code_path.empty());
  }
}

TEST_CASE("resolver: an unstripped copy in a plain --symbols directory names a stripped binary") {
  std::string prog = Env("PTSCOPE_SYMBOLS_PROG");
  std::vector<uint8_t> id = Bytes(ReadelfBuildId(prog));
  TempDir dir;
  fs::create_directories(dir.path / "syms");
  std::string stripped = (dir.path / "app").string();
  REQUIRE(std::system(("objcopy --strip-all '" + prog + "' '" + stripped + "'").c_str()) == 0);
  fs::copy_file(prog, dir.path / "syms" / "app.full");
  {
    ModuleResolver resolver({});
    const ModuleFiles& files = resolver.Resolve(stripped, id);
    CHECK(files.code_path == stripped);
    CHECK(files.debug_path == stripped);
    CHECK(files.debug_origin == "code file");
  }
  ModuleResolver resolver({(dir.path / "syms").string()});
  const ModuleFiles& files = resolver.Resolve(stripped, id);
  CHECK(files.code_path == stripped);
  CHECK(files.code_origin == "recorded path");
  CHECK(files.debug_path == (dir.path / "syms" / "app.full").string());
  CHECK(files.debug_origin == "--symbols");
}

// The names of the entries of `dir` (the resolvers' temp dirs).
std::vector<std::string> EntryNames(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

format::BlobChunk VdsoBlob(uint32_t pid) {
  format::BlobChunk blob;
  blob.kind = format::BlobKind::kVdso;
  blob.pid = pid;
  blob.data = {0x7f, 'E', 'L', 'F'};
  return blob;
}

// TMPDIR pointed at `dir` for one test case, restored however the case ends.
struct TmpdirFor {
  explicit TmpdirFor(const fs::path& dir) {
    const char* now = std::getenv("TMPDIR");
    had = now != nullptr;
    if (had) saved = now;
    REQUIRE(::setenv("TMPDIR", dir.c_str(), 1) == 0);
  }
  ~TmpdirFor() {
    if (had) ::setenv("TMPDIR", saved.c_str(), 1);
    else ::unsetenv("TMPDIR");
  }
  bool had = false;
  std::string saved;
};

// A forked child, SIGKILLed and reaped however the case ends (a failed REQUIRE included).
struct ChildProcess {
  pid_t pid = -1;
  ~ChildProcess() { Kill(); }
  void Kill() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
  }
};

TEST_CASE("resolver: a killed decoder's temp dir is removed by the next one, a live one's kept") {
  TempDir tmp;
  TmpdirFor tmpdir(tmp.path);
  // Not the sweep's: an earlier version's dir (no lock), a staging dir, another user's dir.
  fs::create_directory(tmp.path / "ptscope-modules-old");
  fs::create_directory(tmp.path / "ptscope-embedding-abcdef");
  // Another user's: only root can make one (chown). Without root that check is left out, and the
  // message says so; CI runs as root.
  const bool other_users = ::geteuid() == 0;
  if (other_users) {
    fs::create_directory(tmp.path / "ptscope-embedded-nobody");
    REQUIRE(::chown((tmp.path / "ptscope-embedded-nobody").c_str(), 65534, 65534) == 0);
  } else {
    MESSAGE("not root: the check that another user's dir is kept is left out");
  }
  const std::vector<std::string> others =
      other_users ? std::vector<std::string>{"ptscope-embedded-nobody", "ptscope-embedding-abcdef",
                                             "ptscope-modules-old"}
                  : std::vector<std::string>{"ptscope-embedding-abcdef", "ptscope-modules-old"};
  auto ours = [&] {  // the entries that are not `others`
    std::vector<std::string> names;
    for (const std::string& name : EntryNames(tmp.path)) {
      if (std::find(others.begin(), others.end(), name) == others.end()) names.push_back(name);
    }
    return names;
  };

  // A decoder process that extracts an embedded vdso, then is SIGKILLed: no destructor runs.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  ChildProcess child;
  child.pid = ::fork();
  REQUIRE(child.pid >= 0);
  if (child.pid == 0) {
    ModuleResolver killed({});
    const bool added = killed.AddBlob(VdsoBlob(7)).has_value();
    char byte = added && !killed.VdsoPath(7).empty() ? 'y' : 'n';
    if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  const ssize_t got = ::read(ready[0], &byte, 1);
  ::close(ready[0]);
  REQUIRE(got == 1);
  CHECK(byte == 'y');
  child.Kill();
  REQUIRE(ours().size() == 1);
  const std::string killed_dir = ours()[0];
  CHECK(killed_dir.rfind("ptscope-embedded-", 0) == 0);
  CHECK(fs::exists(tmp.path / killed_dir / "vdso-7.so"));
  CHECK(fs::status(tmp.path / killed_dir).permissions() == fs::perms::owner_all);

  {
    ModuleResolver live({});
    REQUIRE(live.AddBlob(VdsoBlob(8)).has_value());
    const fs::path live_dir = fs::path(live.VdsoPath(8)).parent_path();
    CHECK(live_dir.parent_path() == tmp.path);
    // The live resolver took the killed one's dir away on its way in, and nothing else.
    CHECK(ours() == std::vector<std::string>{live_dir.filename()});
    CHECK(EntryNames(tmp.path).size() == others.size() + 1);
    {
      ModuleResolver next({});
      REQUIRE(next.AddBlob(VdsoBlob(9)).has_value());
      const fs::path next_dir = fs::path(next.VdsoPath(9)).parent_path();
      CHECK(next_dir != live_dir);
      // Its lock keeps the live dir (in the same process, as a second pt-decode would find it).
      CHECK(fs::exists(live_dir / "vdso-8.so"));
      CHECK(ours().size() == 2);
    }
    CHECK(ours() == std::vector<std::string>{live_dir.filename()});
  }
  CHECK(ours().empty());
  CHECK(EntryNames(tmp.path) == others);
}

TEST_CASE("resolver: a TMPDIR that cannot hold the temp dir is named in a note, nothing written") {
  TempDir tmp;
  const fs::path missing = tmp.path / "missing";
  TmpdirFor tmpdir(missing);
  ModuleResolver resolver({});
  REQUIRE(resolver.AddBlob(VdsoBlob(7)).has_value());
  CHECK(resolver.VdsoPath(7).empty());
  CHECK(resolver.notes() ==
        std::vector<std::string>{"cannot create a temporary directory under " + missing.string() +
                                 " for embedded binaries; set TMPDIR to a writable directory"});
  CHECK_FALSE(fs::exists(missing));
}

TEST_CASE("symbolizer: demangled C++ method, inlined frames, function start") {
  std::string prog = Env("PTSCOPE_SYMBOLS_PROG");
  Symbolizer symbolizer;
  uint64_t method = NmAddress(prog, "demo::Widget::Frobnicate(int)");
  REQUIRE(method != 0);
  Symbol symbol = symbolizer.Symbolize(prog, method);
  CHECK(symbol.function == "demo::Widget::Frobnicate(int)");
  CHECK(symbol.file.find("symbols_test_program.cpp") != std::string::npos);
  CHECK(symbol.line == 11);
  CHECK(symbolizer.FunctionStart(prog, method + 2) == method);

  // OuterFunction's first instruction computes x * x: InlinedHelper, inlined.
  uint64_t outer = NmAddress(prog, "OuterFunction");
  Symbol inlined = symbolizer.Symbolize(prog, outer);
  CHECK(inlined.function == "OuterFunction");
  REQUIRE(inlined.inlined.size() == 1);
  CHECK(inlined.inlined[0].function == "InlinedHelper");  // DW_AT_name: no linkage name
  CHECK(inlined.inlined[0].line == 14);

  CHECK_FALSE(symbolizer.Symbolize("/nonexistent/file", 0x1000).found);
  CHECK_FALSE(symbolizer.Symbolize("/nonexistent/file", 0x2000).found);
  REQUIRE(symbolizer.failures().size() == 1);  // reported once
  CHECK(symbolizer.failures()[0].rfind("/nonexistent/file: ", 0) == 0);
}

}  // namespace
}  // namespace ptscope::symbols
