// pt-archive verify FILE: reads (and decompresses and decodes) every chunk. Exit 0 only when all
// chunks are intact and the End chunk is present. Otherwise lists every damaged range with the
// chunks recovered after it (the reader goes on at the next intact chunk), and exits 3 when
// chunks were recovered (the archive is usable, partly), 1 when none was.
#include <cinttypes>
#include <cstdio>
#include <map>

#include "commands.h"
#include "ptscope/format.h"

namespace ptscope::tools {
namespace {

std::string HexOffset(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%" PRIx64, value);
  return text;
}

// The chunks read after one damaged range (or from the start), by type.
struct Run {
  uint64_t first_offset = 0, chunks = 0;
  std::map<std::string, uint64_t> by_type;
  std::string Describe() const {
    std::string text = std::to_string(chunks) + " chunk" + (chunks == 1 ? "" : "s");
    if (chunks == 0) return text;
    text += " from offset " + HexOffset(first_offset) + " (";
    bool first = true;
    for (const auto& [type, count] : by_type) {
      text += (first ? "" : ", ") + type + " " + std::to_string(count);
      first = false;
    }
    return text + ")";
  }
};

}  // namespace

int RunVerify(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::variables_map vm;
  if (auto exit = ParseCommandLine("verify", "FILE", args, po::options_description("verify options"),
                                   {"file"}, vm)) {
    return *exit;
  }
  std::string path = vm["file"].as<std::string>();
  auto reader = format::ArchiveReader::Open(path);
  if (!reader) return ReportError(reader.error());
  format::ArchiveReader& r = **reader;
  std::vector<Run> runs(1);  // runs[i + 1]: the chunks read after damage()[i]
  while (std::optional<format::Chunk> chunk = r.Next()) {
    if (runs.size() <= r.damage().size()) runs.resize(r.damage().size() + 1);
    Run& run = runs.back();
    if (run.chunks++ == 0) run.first_offset = r.last_location().offset;
    ++run.by_type[format::ChunkTypeName(format::TypeOf(*chunk))];
  }
  runs.resize(r.damage().size() + 1);
  std::string skipped;
  if (r.chunks_skipped() > 0) {
    skipped = ", " + std::to_string(r.chunks_skipped()) + " of a newer version skipped";
  }
  if (r.complete() && r.damage().empty()) {
    std::printf("%s: OK: %" PRIu64 " chunks intact%s, End chunk present, %" PRIu64 " bytes\n",
                path.c_str(), r.chunks_read(), skipped.c_str(), r.file_size());
    return kExitOk;
  }
  uint64_t lost = 0;
  for (const format::Damage& d : r.damage()) lost += d.end - d.offset;
  std::string lost_text;
  if (!r.damage().empty()) {
    lost_text = std::to_string(r.damage().size()) + " damaged range" +
                (r.damage().size() == 1 ? "" : "s") + " (" + std::to_string(lost) + " of " +
                std::to_string(r.file_size()) + " bytes lost), ";
  }
  std::printf("%s: %s: %" PRIu64 " chunks intact%s, %s%s\n", path.c_str(),
              r.damage().empty() ? "INCOMPLETE" : "DAMAGED", r.chunks_read(), skipped.c_str(),
              lost_text.c_str(), r.complete() ? "End chunk present" : "no End chunk");
  std::printf("  intact from the start: %s\n", runs[0].Describe().c_str());
  for (size_t i = 0; i < r.damage().size(); ++i) {
    const format::Damage& d = r.damage()[i];
    std::printf("  damaged [%s, %s) (%" PRIu64 " bytes): %s\n", HexOffset(d.offset).c_str(),
                HexOffset(d.end).c_str(), d.end - d.offset, d.reason.c_str());
    std::printf("    recovered after it: %s\n", runs[i + 1].Describe().c_str());
  }
  if (!r.complete() && r.damage().empty()) {
    std::printf("  no End chunk at offset %s: the capture was cut off at a chunk boundary\n",
                HexOffset(r.file_size()).c_str());
  }
  std::fflush(stdout);
  const std::string what = r.damage().empty() ? std::string("the capture was cut off (no End chunk)")
                                              : lost_text.substr(0, lost_text.size() - 2);
  if (r.chunks_read() == 0) {
    return ReportError(MakeError(Errc::kCorrupt, path + ": " + what + "; no chunk is intact"));
  }
  std::fprintf(stderr, "pt-archive: %s: %s; the intact chunks listed above are usable "
               "(pt-decode decodes them)\n", path.c_str(), what.c_str());
  return kExitPartial;
}

}  // namespace ptscope::tools
