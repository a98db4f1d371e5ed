// pt-archive verify FILE: reads (and decompresses and decodes) every chunk. Exit 0 only when all
// chunks are intact and the End chunk is present; otherwise says what is damaged and what is
// still usable.
#include <cinttypes>
#include <cstdio>

#include "commands.h"
#include "ptscope/format.h"

namespace ptscope::tools {

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
  while (r.Next()) {
  }
  std::string skipped;
  if (r.chunks_skipped() > 0) {
    skipped = ", " + std::to_string(r.chunks_skipped()) + " of a newer version skipped";
  }
  if (r.complete() && !r.damage()) {
    std::printf("%s: OK: %" PRIu64 " chunks intact%s, End chunk present, %" PRIu64 " bytes\n",
                path.c_str(), r.chunks_read(), skipped.c_str(), r.file_size());
    return kExitOk;
  }
  uint64_t usable_end = r.damage() ? r.damage()->offset : r.file_size();
  std::printf("%s: %s\n", path.c_str(), r.damage() ? "DAMAGED" : "INCOMPLETE");
  std::printf("usable: %" PRIu64 " chunks recovered up to offset 0x%" PRIx64 " (of %" PRIu64
              " bytes)%s\n",
              r.chunks_read(), usable_end, r.file_size(), skipped.c_str());
  std::fflush(stdout);
  if (r.damage()) return ReportError(MakeError(r.damage()->code, path + ": " + r.damage()->reason));
  char where[32];
  std::snprintf(where, sizeof where, "0x%" PRIx64, usable_end);
  return ReportError(MakeError(Errc::kTruncated, path + ": no End chunk at offset " + where +
                                                     ": the capture was cut off"));
}

}  // namespace ptscope::tools
