#include "pt_filter.h"

#include <cstdio>
#include <string_view>

#include "elf_file.h"

namespace ptscope::record {
namespace {

std::string Trim(std::string_view s) {
  size_t a = s.find_first_not_of(" \t");
  size_t b = s.find_last_not_of(" \t");
  return a == std::string_view::npos ? std::string() : std::string(s.substr(a, b - a + 1));
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

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
  if (action != "filter" && action != "start" && action != "stop")
    return bad("action '" + action + "' is not filter, start or stop");
  std::string what = Trim(std::string_view(item).substr(space + 1, at - space - 1));
  std::string file = Trim(std::string_view(item).substr(at + 1));
  if (what.empty() || file.empty()) return bad("missing symbol or file");
  if (file[0] != '/') return bad("the file must be an absolute path");
  if (what.rfind("0x", 0) == 0) return action + " " + what + "@" + file;  // already an offset
  PTSCOPE_ASSIGN_OR_RETURN(ElfFile elf, ElfFile::Open(file));
  PTSCOPE_ASSIGN_OR_RETURN(ElfSymbol sym, elf.FindSymbol(what));
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t offset, elf.VaddrToFileOffset(sym.value));
  if (action == "filter" && sym.size == 0) return bad("symbol " + what + " has size 0");
  std::string range = Hex(offset);
  if (sym.size != 0) range += "/" + Hex(sym.size);
  return action + " " + range + "@" + file;
}

}  // namespace

Result<std::string> ResolvePtFilter(const std::string& text) {
  std::string out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = Trim(std::string_view(text).substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (!item.empty()) {
      PTSCOPE_ASSIGN_OR_RETURN(std::string resolved, ResolveItem(item));
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
