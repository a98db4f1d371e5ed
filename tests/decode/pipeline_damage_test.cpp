// A capture whose file changes between opening and decoding (decode/src/parallel/unit_planner.h): the PT
// chunks are read again while decoding, and one that no longer reads cuts its piece short with an
// in-band decode-error gap; everything before it decodes as in the undamaged capture, and the
// decode still succeeds. The capture is a pt-synth walk (PT_SYNTH, CORPUS_STATIC: set by meson).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "ptscope/decode.h"
#include "ptscope/format.h"

namespace ptscope::decode {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/ptscope-damage-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
};

// Opens the archive as pt-decode does (PT read again while decoding), calls `before` (when set)
// between opening and decoding, and decodes it to text.
using BetweenOpenAndDecode = void (*)(const format::Archive&, const std::string&);
Result<DecodeSummary> Decode(const std::string& archive_path, const std::string& output,
                             unsigned jobs, BetweenOpenAndDecode before) {
  auto archive = format::ReadArchive(archive_path, format::ReadOptions{.keep_pt_bytes = false});
  REQUIRE(archive);
  if (before != nullptr) before(*archive, archive_path);
  PipelineOptions options;
  options.jobs = jobs;
  options.format = OutputFormat::kText;
  options.output_path = output;
  return RunPipeline(*archive, options);
}

// Zeros in the middle of the PT chunk three quarters of the way through the capture.
void DamageOneChunk(const format::Archive& archive, const std::string& path) {
  REQUIRE(archive.pt_refs.size() >= 8);
  const format::Archive::PtDataRef& victim = archive.pt_refs[archive.pt_refs.size() * 3 / 4];
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f != nullptr);
  REQUIRE(std::fseek(f, static_cast<long>(victim.chunk_offset + 64), SEEK_SET) == 0);
  std::string zeros(256, '\0');
  REQUIRE(std::fwrite(zeros.data(), 1, zeros.size(), f) == zeros.size());
  std::fclose(f);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text format's "[start +duration]" as "[start]".
std::string WithoutDurations(const std::string& text) {
  static const std::regex duration(R"(\[(\d+) \+\d+\])");
  return std::regex_replace(text, duration, "[$1]");
}

TEST_CASE("a PT chunk that no longer reads while decoding becomes a gap, not a failed decode") {
  TempDir dir;
  const std::string capture = dir.path + "/walk.ptar";
  const std::string command = std::string(PT_SYNTH) + " -o " + capture + " --binary " +
                              CORPUS_STATIC + " --instructions 3000000 --seed 5" +
                              " --piece-size 8192 > /dev/null";
  REQUIRE(std::system(command.c_str()) == 0);
  for (unsigned jobs : {1u, 2u}) {
    CAPTURE(jobs);
    auto whole = Decode(capture, dir.path + "/whole.txt", jobs, nullptr);
    REQUIRE(whole);
    CHECK(whole->stats[Stat::kDecodeErrorGaps] == 0);
    const std::string copy = dir.path + "/damaged.ptar";
    REQUIRE(std::system(("cp " + capture + " " + copy).c_str()) == 0);
    auto damaged = Decode(copy, dir.path + "/damaged.txt", jobs, DamageOneChunk);
    REQUIRE(damaged);
    CHECK(damaged->stats[Stat::kDecodeErrorGaps] == 1);
    // About three quarters of the instructions: those before the damaged chunk's piece.
    CHECK(damaged->instructions > whole->instructions / 2);
    CHECK(damaged->instructions < whole->instructions);
    bool named = false;
    for (const std::string& note : damaged->notes) {
      named = named || (note.find("cannot read the trace: " + copy) != std::string::npos &&
                        note.find("the rest of this piece of trace is not decoded") !=
                            std::string::npos);
    }
    CHECK(named);
    // Up to the gap, the same slices start at the same times as in the undamaged decode (those
    // still open at the gap end there, so durations are left out), and the gap is in it.
    const std::string before = WithoutDurations(ReadText(dir.path + "/whole.txt"));
    const std::string after = WithoutDurations(ReadText(dir.path + "/damaged.txt"));
    const size_t gap = after.find("cannot read the trace");
    REQUIRE(gap != std::string::npos);
    const size_t line = after.rfind('\n', gap);
    REQUIRE(line != std::string::npos);
    CHECK(after.compare(0, line, before, 0, line) == 0);
  }
}

}  // namespace
}  // namespace ptscope::decode
