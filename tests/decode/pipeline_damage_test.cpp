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
#include "../support/temp_dir.h"

namespace ptscope::decode {
namespace {

using TempDir = ptscope::testing::TempDir;

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

// A pt-synth walk of 3 M instructions over corpus-static into `path`, with `options`.
void Synth(const std::string& path, const std::string& options) {
  const std::string command = std::string(PT_SYNTH) + " -o " + path + " --binary " +
                              CORPUS_STATIC + " --instructions 3000000 " + options + " > /dev/null";
  REQUIRE(std::system(command.c_str()) == 0);
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
  TempDir dir{"ptscope-damage"};
  const std::string capture = dir.path + "/walk.ptar";
  Synth(capture, "--seed 5 --piece-size 8192");
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

// A per-CPU capture (3 threads on 2 CPUs, a switch every few hundred instructions: 7 sideband
// chunks) opened as pt-decode opens it (neither PT nor sideband bytes kept) with a schedule held
// only up to one run: every CPU's thread is looked up in chunks read again, and the output is
// byte for byte the one with everything held. A capture gone before its sideband is read again
// decodes, with each chunk counted as unread and a note saying so.
TEST_CASE("a per-CPU schedule read again from the sideband chunks: the same output, or counted") {
  TempDir dir{"ptscope-damage"};
  const std::string capture = dir.path + "/percpu.ptar";
  Synth(capture, "--seed 2 --threads 3 --cpus 2 --timeslice 500");
  auto decode = [&](const format::ReadOptions& read, size_t held, unsigned jobs, bool remove_first,
                    const std::string& output) {
    auto archive = format::ReadArchive(capture, read);
    REQUIRE(archive);
    CHECK(archive->sideband.size() == 7);
    if (!read.keep_sideband_bytes) CHECK(archive->sideband_offsets.size() == 7);
    PipelineOptions options;
    options.jobs = jobs;
    options.format = OutputFormat::kText;
    options.output_path = output;
    options.held_schedule_runs = held;
    if (remove_first) REQUIRE(std::remove(capture.c_str()) == 0);  // gone before Build
    return RunPipeline(*archive, options);
  };
  const format::ReadOptions held_whole{.keep_pt_bytes = false};
  const format::ReadOptions as_pt_decode{.keep_pt_bytes = false, .keep_sideband_bytes = false};
  auto whole = decode(held_whole, 0, 1, false, dir.path + "/whole.txt");
  REQUIRE(whole);
  CHECK(whole->threads == 3);
  CHECK(whole->sideband_unread_chunks == 0);
  for (unsigned jobs : {1u, 2u}) {
    CAPTURE(jobs);
    const std::string output = dir.path + "/streamed" + std::to_string(jobs) + ".txt";
    auto streamed = decode(as_pt_decode, 1, jobs, false, output);
    REQUIRE(streamed);
    CHECK(streamed->sideband_unread_chunks == 0);
    CHECK(streamed->instructions == whole->instructions);
    CHECK(ReadText(output) == ReadText(dir.path + "/whole.txt"));
  }
  const format::ReadOptions pt_kept{.keep_sideband_bytes = false};
  auto gone = decode(pt_kept, 1, 1, true, dir.path + "/gone.txt");
  REQUIRE(gone);
  CHECK(gone->sideband_unread_chunks == 7);
  bool noted = false;
  for (const std::string& note : gone->notes) {
    noted = noted || note.find("sideband chunks of " + capture + " could not be read again") !=
                         std::string::npos;
  }
  CHECK(noted);
}

// The same capture with one sideband chunk (the fourth of seven) overwritten between opening and
// decoding: only that chunk is unread, its note names its file offset and the checksum that
// failed, and the other six are read again as before (pt-decode then exits 3: PartialReasons).
TEST_CASE("a sideband chunk that changed while decoding is the only one counted unread") {
  TempDir dir{"ptscope-damage"};
  const std::string capture = dir.path + "/percpu.ptar";
  Synth(capture, "--seed 2 --threads 3 --cpus 2 --timeslice 500");
  const format::ReadOptions as_pt_decode{.keep_pt_bytes = false, .keep_sideband_bytes = false};
  auto archive = format::ReadArchive(capture, as_pt_decode);
  REQUIRE(archive);
  REQUIRE(archive->sideband_offsets.size() == 7);
  const uint64_t victim = archive->sideband_offsets[3];
  {
    std::FILE* f = std::fopen(capture.c_str(), "r+b");
    REQUIRE(f != nullptr);
    // The first payload byte (after the 32-byte chunk header), flipped: the header still reads.
    REQUIRE(std::fseek(f, static_cast<long>(victim + 32), SEEK_SET) == 0);
    const int byte = std::fgetc(f);
    REQUIRE(byte != EOF);
    REQUIRE(std::fseek(f, static_cast<long>(victim + 32), SEEK_SET) == 0);
    REQUIRE(std::fputc(byte ^ 0xff, f) != EOF);
    std::fclose(f);
  }
  PipelineOptions options;
  options.jobs = 1;
  options.format = OutputFormat::kText;
  options.output_path = dir.path + "/changed.txt";
  options.held_schedule_runs = 1;
  auto changed = RunPipeline(*archive, options);
  REQUIRE(changed);
  CHECK(changed->sideband_unread_chunks == 1);
  CHECK(changed->instructions > 0);
  char offset[32];
  std::snprintf(offset, sizeof offset, "0x%llx", static_cast<unsigned long long>(victim));
  bool named = false, counted = false;
  for (const std::string& note : changed->notes) {
    named = named || (note.find(std::string("read again at file offset ") + offset) !=
                          std::string::npos &&
                      note.find("payload checksum mismatch") != std::string::npos);
    counted = counted || note.find("1 sideband chunk of " + capture + " could not be read again") !=
                             std::string::npos;
  }
  CHECK(named);
  CHECK(counted);
}

}  // namespace
}  // namespace ptscope::decode
