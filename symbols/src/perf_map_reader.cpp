// perf map parsing (see perf_map_reader.h).
#include "perf_map_reader.h"

#include <cctype>

namespace ptscope::symbols {
namespace {

// Parses one hex field at `pos` (optional 0x/0X, either case); advances `pos` past it.
bool ParseHex(std::string_view line, size_t& pos, uint64_t& value) {
  if (pos + 1 < line.size() && line[pos] == '0' && (line[pos + 1] == 'x' || line[pos + 1] == 'X'))
    pos += 2;
  size_t digits = 0;
  value = 0;
  while (pos < line.size() && std::isxdigit(static_cast<unsigned char>(line[pos]))) {
    if (++digits > 16) return false;
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(line[pos])));
    value = value * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    ++pos;
  }
  return digits > 0;
}

bool SkipBlanks(std::string_view line, size_t& pos) {
  size_t start = pos;
  while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
  return pos > start;
}

}  // namespace

PerfMap ParsePerfMap(std::string_view text, const std::string& source) {
  PerfMap map;
  uint64_t line_number = 0;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    PerfMapEntry entry;
    size_t pos = 0;
    bool ok = ParseHex(line, pos, entry.start) && SkipBlanks(line, pos) &&
              ParseHex(line, pos, entry.size) && SkipBlanks(line, pos) && pos < line.size();
    if (ok) {
      entry.name = std::string(line.substr(pos));
      while (!entry.name.empty() && (entry.name.back() == ' ' || entry.name.back() == '\t'))
        entry.name.pop_back();
      ok = !entry.name.empty() && entry.size != 0 && entry.start + entry.size > entry.start;
    }
    if (!ok) {
      if (map.bad_lines++ == 0) {
        map.first_bad = source + ":" + std::to_string(line_number) +
                        ": not a \"START SIZE name\" line (hex START and SIZE, SIZE > 0)";
      }
      continue;
    }
    map.entries.push_back(std::move(entry));
  }
  return map;
}

}  // namespace ptscope::symbols
