// pt-archive subcommands. Each command is one function taking the arguments after its name and
// returning the process exit status; pt_archive_main.cpp holds the table that names them.
// To add a command: define `int RunX(const std::vector<std::string>& args)` in a new source
// file, declare it here, list the file in meson.build and add one row to kCommands.
//
// Exit status convention (README "Exit status"): 0 complete; 3 done, but the input was damaged
// or truncated (the output holds what was intact; a line on stderr says what was lost); 1 failed,
// nothing useful done (one line on stderr: "pt-archive: FILE: <reason>"); 2 usage error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "ptscope/format.h"
#include "ptscope/result.h"

namespace ptscope::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitPartial = 3;
// The exit statuses, as --help prints them.
inline constexpr const char* kExitStatusHelp =
    "Exit status:\n"
    "  0  complete: the input was intact (verify: and its End chunk is there)\n"
    "  3  done, but the input was damaged or cut off: the output holds what was intact, and a\n"
    "     line on stderr says what was lost\n"
    "  1  failed: nothing usable (the message names the file and the offset)\n"
    "  2  usage error\n";

int RunInfo(const std::vector<std::string>& args);
int RunVerify(const std::vector<std::string>& args);
int RunExtract(const std::vector<std::string>& args);
int RunImportPerf(const std::vector<std::string>& args);  // perf_commands.cpp (issue #6)
int RunExportPerf(const std::vector<std::string>& args);  // perf_commands.cpp (issue #6)
int RunEmbed(const std::vector<std::string>& args);       // embed_command.cpp (issue #7)

// Prints "pt-archive: <message>" on stderr and returns kExitBadInput.
int ReportError(const Error& error);
// The exit status for having used `archive` (read from `path`): kExitOk when it was intact and
// complete; else kExitPartial, after a line on stderr saying what was lost and that `done` (what
// the command did, e.g. "extracted the blobs of the intact chunks") covers the rest.
int InputStatus(const std::string& path, const format::Archive& archive, const std::string& done);

// Parses a command's arguments: `options` (plus -h/--help, added here) and the positional
// arguments named in `positionals`, all required. On --help or a usage error, prints and returns
// the exit status; otherwise fills `vm` and returns std::nullopt.
std::optional<int> ParseCommandLine(const char* command, const char* synopsis,
                                    const std::vector<std::string>& args,
                                    boost::program_options::options_description options,
                                    const std::vector<const char*>& positionals,
                                    boost::program_options::variables_map& vm);

}  // namespace ptscope::tools
