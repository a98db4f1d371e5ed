// Shared command-line plumbing for the pt-archive subcommands. Boost.Program_options reports
// problems by exception; they are caught here and turned into a usage message (exit 2).
#include <cctype>
#include <cstdio>
#include <iostream>

#include "commands.h"

namespace ptscope::tools {

namespace po = boost::program_options;

int ReportError(const Error& error) {
  std::fprintf(stderr, "pt-archive: %s\n", error.message.c_str());
  return kExitBadInput;
}

int InputStatus(const std::string& path, const format::Archive& archive, const std::string& done) {
  if (archive.damage.empty() && archive.complete) return kExitOk;
  std::string lost = !archive.damage.empty()
                         ? format::DescribeDamage(archive.damage)
                         : "no End chunk: the capture was cut off after its last intact chunk";
  std::fflush(stdout);
  std::fprintf(stderr, "pt-archive: %s: %s; %s\n", path.c_str(), lost.c_str(), done.c_str());
  return kExitPartial;
}

std::optional<int> ParseCommandLine(const char* command, const char* synopsis,
                                    const std::vector<std::string>& args,
                                    po::options_description options,
                                    const std::vector<const char*>& positionals,
                                    po::variables_map& vm) {
  options.add_options()("help,h", "show this help");
  po::options_description all;
  all.add(options);
  po::options_description hidden;
  po::positional_options_description positional;
  for (const char* name : positionals) {
    hidden.add_options()(name, po::value<std::string>()->required());
    positional.add(name, 1);
  }
  all.add(hidden);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: pt-archive " << command << " " << synopsis << "\n" << options << "\n"
                << kExitStatusHelp;
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::required_option& e) {
    // A missing positional argument: name it the way the synopsis does (FILE, DIR).
    std::string name = e.get_option_name();
    name = name.substr(name.find_first_not_of('-'));
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::fprintf(stderr, "pt-archive %s: missing argument %s\nusage: pt-archive %s %s\n", command,
                 name.c_str(), command, synopsis);
    return kExitUsage;
  } catch (const po::error& e) {
    std::fprintf(stderr, "pt-archive %s: %s\nusage: pt-archive %s %s\n", command, e.what(),
                 command, synopsis);
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace ptscope::tools
