// decode::ResolvedModules (ptscope/decode.h): modules resolved and symbols loaded once, kept for
// later decodes of the same program (the decode fuzz target's speed depends on it). A decode that
// uses them writes exactly what a decode that finds them itself writes, the second time as the
// first, and also for a copy of the capture without its embedded binaries (they come from the
// archive ResolvedModules was made from). The capture: tests/fuzz/decode_base.ptar (DECODE_BASE,
// set by meson), a pt-emulate capture of corpus-calls with its binaries embedded.
#include <doctest/doctest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "ptscope/decode.h"
#include "ptscope/format.h"

namespace ptscope::decode {
namespace {

std::string DecodeToText(format::Archive archive, ResolvedModules* resolved, uint64_t* symbolized) {
  char path[] = "/tmp/ptscope-resolved-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  PipelineOptions options;
  options.format = OutputFormat::kText;
  options.output_path = path;
  options.resolved = resolved;
  auto summary = RunPipeline(archive, options);
  REQUIRE_MESSAGE(summary, (summary ? "" : summary.error().message));
  *symbolized = summary->symbolized_instructions;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  return text.str();
}

TEST_CASE("decodes with modules resolved once write what decodes that resolve them write") {
  auto base = format::ReadArchive(DECODE_BASE);
  REQUIRE(base);
  REQUIRE(base->blobs.size() >= 3);
  uint64_t symbolized_alone = 0;
  const std::string alone = DecodeToText(*base, nullptr, &symbolized_alone);
  REQUIRE(alone.find("main") != std::string::npos);  // names come from the embedded binary
  REQUIRE(symbolized_alone > 0);

  auto resolved = ResolvedModules::ForArchive(*base, {});
  REQUIRE(resolved);
  format::Archive without_blobs = *base;
  without_blobs.blobs.clear();
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    uint64_t symbolized = 0;
    CHECK(DecodeToText(*base, resolved->get(), &symbolized) == alone);
    CHECK(symbolized == symbolized_alone);
    CHECK(DecodeToText(without_blobs, resolved->get(), &symbolized) == alone);
    CHECK(symbolized == symbolized_alone);
  }
}

}  // namespace
}  // namespace ptscope::decode
