// pt-archive: inspect, verify and extract .ptar archives; convert to and from perf.data.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#include "ptscope/tool_version.h"

namespace ptscope::tools {
namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

// One row per subcommand (see commands.h for how to add one).
constexpr Command kCommands[] = {
    {"info", "FILE: header, metadata, PT streams, processes, modules, blobs, markers", RunInfo},
    {"verify", "FILE: check every chunk; exit 0 only for an intact, complete archive", RunVerify},
    {"extract", "FILE DIR: write blobs and embedded binaries with a manifest", RunExtract},
    {"import-perf", "perf.data -o OUT.ptar [--embed-binaries]: convert from perf", RunImportPerf},
    {"export-perf", "IN.ptar -o perf.data: convert to perf (perf script can decode it)",
     RunExportPerf},
    {"embed", "IN.ptar --symbols DIR [--debug-info] [-o OUT]: copy binaries in by build id",
     RunEmbed},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: pt-archive COMMAND [ARGS] (pt-archive COMMAND --help for details)\n"
                    "       pt-archive --version\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
  std::fprintf(out, "\n%s", kExitStatusHelp);
}

}  // namespace
}  // namespace ptscope::tools

int main(int argc, char** argv) {
  using namespace ptscope::tools;
  if (argc < 2) {
    PrintUsage(stderr);
    return kExitUsage;
  }
  std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    PrintUsage(stdout);
    return kExitOk;
  }
  if (name == "--version") {
    std::printf("%s\n", ptscope::format::VersionLine("pt-archive").c_str());
    return kExitOk;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const Command& c : kCommands) {
    if (name == c.name) return c.run(args);
  }
  std::string names;
  for (const Command& c : kCommands) names += std::string(names.empty() ? "" : ", ") + c.name;
  std::fprintf(stderr, "pt-archive: unknown command '%s' (commands: %s)\n", name.c_str(),
               names.c_str());
  return kExitUsage;
}
