// Symbolizer::InlineDepths (one DWARF walk per function) against Symbolizer::Symbolize (LLVM's
// inlined chain per address): they must agree on every address they both answer for. Inputs:
// the small -O2 test program (a known always_inline helper) and this test executable itself
// (C++ at -O2 with doctest and the standard library: deep, nested and partial inlining).
#include <doctest/doctest.h>
#include <unistd.h>

#include <llvm/Object/ELFObjectFile.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "ptscope/symbols.h"

namespace ptscope::symbols {
namespace {

std::string SelfPath() {
  char path[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string();
}

struct Coverage {
  size_t spans = 0, checked = 0, inlined = 0, declined = 0, deepest = 0;
};

// Walks the executable segments span by span; in each span checks every depth change (the
// addresses on both sides) and a sample of addresses against Symbolize.
Coverage CheckAgainstSymbolize(const std::string& path) {
  Coverage coverage;
  Result<ElfInfo> elf = ReadElfInfo(path);
  REQUIRE(elf);
  Symbolizer spans, per_address;  // separate caches: neither answer can come from the other
  std::mt19937_64 random(7);
  for (const LoadSegment& segment : elf->segments) {
    if (!segment.executable) continue;
    uint64_t end = segment.vaddr + segment.filesz;
    for (uint64_t at = segment.vaddr; at < end;) {
      std::shared_ptr<const InlineDepthSpan> span = spans.InlineDepths(path, at);
      if (span == nullptr) {
        ++coverage.declined;
        ++at;
        continue;
      }
      REQUIRE(span->begin <= at);
      REQUIRE(at < span->end);
      REQUIRE(!span->steps.empty());
      CHECK(span->steps.front().vaddr == span->begin);
      ++coverage.spans;
      std::vector<uint64_t> probes{at};
      for (const InlineDepthSpan::Step& step : span->steps) {
        if (step.vaddr > at) probes.push_back(step.vaddr - 1);
        probes.push_back(step.vaddr);
        coverage.deepest = std::max<size_t>(coverage.deepest, step.depth);
      }
      uint64_t stop = std::min(span->end, end);
      for (int i = 0; i < 8; ++i) probes.push_back(at + random() % (stop - at));
      for (uint64_t probe : probes) {
        if (probe < at || probe >= stop) continue;
        uint32_t expected = static_cast<uint32_t>(per_address.Symbolize(path, probe).inlined.size());
        INFO(path << " at 0x" << std::hex << probe << " (span 0x" << span->begin << "-0x"
                  << span->end << ")");
        CHECK(span->DepthAt(probe) == expected);
        ++coverage.checked;
        if (expected != 0) ++coverage.inlined;
      }
      at = stop;
    }
  }
  return coverage;
}

TEST_CASE("inline depth spans: the test program's always_inline helper") {
  std::string prog = std::getenv("PTSCOPE_SYMBOLS_PROG");
  Coverage coverage = CheckAgainstSymbolize(prog);
  CHECK(coverage.declined == 0);
  CHECK(coverage.inlined > 0);  // OuterFunction's InlinedHelper at least
  CHECK(coverage.deepest >= 1);
}

TEST_CASE("inline depth spans: this -O2 C++ test executable, nested inlining") {
  Coverage coverage = CheckAgainstSymbolize(SelfPath());
  MESSAGE("spans " << coverage.spans << ", addresses checked " << coverage.checked
                   << ", inlined " << coverage.inlined << ", deepest " << coverage.deepest
                   << ", declined " << coverage.declined);
  CHECK(coverage.declined == 0);
  CHECK(coverage.spans > 500);
  CHECK(coverage.deepest >= 3);
}

// File offset and size of section `name` in `path` (0, 0 when absent).
std::pair<uint64_t, uint64_t> SectionInFile(const std::string& path, const std::string& name) {
  auto owning = llvm::object::ObjectFile::createObjectFile(path);
  if (!owning) {
    llvm::consumeError(owning.takeError());
    return {0, 0};
  }
  const auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(owning->getBinary());
  for (const llvm::object::ELFSectionRef section : elf->sections()) {
    auto section_name = section.getName();
    if (section_name && *section_name == name) return {section.getOffset(), section.getSize()};
    if (!section_name) llvm::consumeError(section_name.takeError());
  }
  return {0, 0};
}

TEST_CASE("inline depth spans: damaged DWARF neither crashes nor disagrees with Symbolize") {
  std::string prog = std::getenv("PTSCOPE_SYMBOLS_PROG");
  auto [offset, size] = SectionInFile(prog, ".debug_info");
  REQUIRE(size > 64);
  std::string damaged = std::filesystem::temp_directory_path() /
                        ("ptscope-damaged-dwarf-" + std::to_string(::getpid()));
  // Garbage over the second half of .debug_info: abbreviation codes, sizes and offsets that
  // point anywhere.
  for (uint8_t fill : {uint8_t{0xff}, uint8_t{0x00}, uint8_t{0x7f}}) {
    std::filesystem::copy_file(prog, damaged, std::filesystem::copy_options::overwrite_existing);
    {
      std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
      file.seekp(static_cast<std::streamoff>(offset + size / 2));
      std::string garbage(size - size / 2, static_cast<char>(fill));
      file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
    }
    INFO("fill 0x" << std::hex << int{fill});
    Coverage coverage = CheckAgainstSymbolize(damaged);  // every answer given agrees
    CHECK(coverage.spans + coverage.declined > 0);
  }
  std::filesystem::remove(damaged);
}

TEST_CASE("inline depth spans: a binary whose debug info LLVM takes from its .gnu_debuglink is declined") {
  std::string prog = std::getenv("PTSCOPE_SYMBOLS_PROG");
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("ptscope-debuglink-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string stripped = (dir / "prog").string(), debug = (dir / "prog.debug").string();
  // The objcopy recipe of distributions: debug file aside, binary stripped, linked by CRC.
  std::string recipe = "objcopy --only-keep-debug '" + prog + "' '" + debug + "' && objcopy " +
                       "--strip-debug --add-gnu-debuglink='" + debug + "' '" + prog + "' '" +
                       stripped + "'";
  REQUIRE(std::system(recipe.c_str()) == 0);
  Result<ElfInfo> elf = ReadElfInfo(stripped);
  REQUIRE(elf);
  REQUIRE(elf->debuglink == "prog.debug");
  Symbolizer symbolizer;
  size_t declined = 0, inlined_via_debuglink = 0;
  for (const LoadSegment& segment : elf->segments) {
    if (!segment.executable) continue;
    // Every address of the stripped binary: no span (its inlined frames come from prog.debug,
    // which only LLVMSymbolizer's debuglink search finds), except PLT stubs, which have none.
    for (uint64_t at = segment.vaddr; at < segment.vaddr + segment.filesz; ++at) {
      std::shared_ptr<const InlineDepthSpan> span = symbolizer.InlineDepths(stripped, at);
      if (span != nullptr) {
        CHECK(span->steps.size() == 1);
        CHECK(span->steps.front().depth == 0);
        CHECK(symbolizer.Symbolize(stripped, at).inlined.empty());
      } else {
        ++declined;
        if (!symbolizer.Symbolize(stripped, at).inlined.empty()) ++inlined_via_debuglink;
      }
    }
  }
  CHECK(declined > 0);
  CHECK(inlined_via_debuglink > 0);  // the frames a span from the stripped file would have lost
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ptscope::symbols
