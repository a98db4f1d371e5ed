#include "pt_filter.h"

#include <cstdio>
#include <string_view>

#include "elf_file.h"
#include "ptscope/format.h"

namespace ptscope::record {
namespace {

std::string Trim(std::string_view s) {
  size_t a = s.find_first_not_of(" \t");
  size_t b = s.find_last_not_of(" \t");
  return a == std::string_view::npos ? std::string() : std::string(s.substr(a, b - a + 1));
}

using ::ptscope::format::HexAddress;

Result<std::string> ResolveItem(const std::string& item) {
  auto bad = [&](const std::string& why) {
    return MakeError(Errc::kInvalidArgument, "--filter '" + item + "': " + why +
                                                 " (expected 'filter FUNC @ /path/to/file')");
  };
  size_t space = item.find(' ');
  size_t at = item.rfind('@');
  if (space == std::string::npos || at == std::string::npos || at < space)
    return bad("not of the form ACTION WHAT @ FILE");
  std::string action = item.substr(0, space);
  if (action == "start") {
    return MakeError(Errc::kInvalidArgument,
                     "--filter '" + item + "': Intel PT has no start filters (use 'filter FUNC @ "
                     "FILE' to trace only FUNC)");
  }
  if (action != "filter" && action != "stop") {
    return bad("action '" + action + "' is not filter or stop");
  }
  std::string what = Trim(std::string_view(item).substr(space + 1, at - space - 1));
  std::string file = Trim(std::string_view(item).substr(at + 1));
  if (what.empty() || file.empty()) return bad("missing symbol or file");
  if (file[0] != '/') return bad("the file must be an absolute path");
  auto sizeless = [&] {
    return MakeError(Errc::kInvalidArgument,
                     "--filter '" + item + "': '" + action + "' needs a size (0xOFFSET/SIZE, or a "
                     "symbol with a size): Intel PT filters ranges, not single addresses");
  };
  if (what.rfind("0x", 0) == 0) {  // already an offset
    if (what.find('/') == std::string::npos) return sizeless();
    return action + " " + what + "@" + file;
  }
  PTSCOPE_ASSIGN_OR_RETURN(ElfFile elf, ElfFile::Open(file));
  PTSCOPE_ASSIGN_OR_RETURN(ElfSymbol sym, elf.FindSymbol(what));
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t offset, elf.VaddrToFileOffset(sym.value));
  if (sym.size == 0) return sizeless();
  std::string range = HexAddress(offset);
  if (sym.size != 0) range += "/" + HexAddress(sym.size);
  return action + " " + range + "@" + file;
}

}  // namespace

Result<std::string> ResolvePtFilter(const std::string& text, const FilterLimits& limits) {
  if (limits.cpu_wide) {
    return MakeError(Errc::kInvalidArgument,
                     "--filter with -a: the kernel takes address filters in files only for a "
                     "program or -p PID, not for every CPU (they would mean different addresses "
                     "in each process)");
  }
  if (limits.max_ranges && *limits.max_ranges == 0) {
    return MakeError(Errc::kInvalidArgument,
                     "--filter: this CPU has no Intel PT address filters (caps/num_address_ranges "
                     "is 0)");
  }
  uint32_t ranges = 0;
  std::string out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = Trim(std::string_view(text).substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (!item.empty()) {
      PTSCOPE_ASSIGN_OR_RETURN(std::string resolved, ResolveItem(item));
      if (limits.max_ranges && ++ranges > *limits.max_ranges) {
        return MakeError(Errc::kInvalidArgument,
                         "--filter: " + std::to_string(ranges) + " ranges, but this CPU has " +
                             std::to_string(*limits.max_ranges) +
                             " (caps/num_address_ranges)");
      }
      if (!out.empty()) out += ",";
      out += resolved;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.empty()) return MakeError(Errc::kInvalidArgument, "--filter is empty");
  return out;
}

}  // namespace ptscope::record
