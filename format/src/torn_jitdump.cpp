#include "ptscope/torn_jitdump.h"

#include <charconv>
#include <cstdio>
#include <map>

namespace ptscope::format {
namespace {

constexpr std::string_view kPrefix = "jit.torn.";

std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(value));
  return text;
}

bool ParseNumber(std::string_view text, int base, uint64_t* value) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value, base);
  return ec == std::errc() && end == text.data() + text.size();
}

// "ADDR SIZE NAME" in hex, as a perf map line (the name may hold spaces).
bool ParseCode(std::string_view text, TornJitCode* code) {
  size_t first = text.find(' ');
  if (first == std::string_view::npos) return false;
  size_t second = text.find(' ', first + 1);
  if (second == std::string_view::npos) return false;
  code->name = std::string(text.substr(second + 1));
  return ParseNumber(text.substr(0, first), 16, &code->address) &&
         ParseNumber(text.substr(first + 1, second - first - 1), 16, &code->size);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> TornJitdumpMetadata(const TornJitdump& torn,
                                                                     unsigned index) {
  const std::string prefix = std::string(kPrefix) + std::to_string(index) + ".";
  std::vector<std::pair<std::string, std::string>> m = {
      {prefix + "pid", std::to_string(torn.pid)},
      {prefix + "jitdump", torn.jitdump},
      {prefix + "bytes_kept", std::to_string(torn.bytes_kept)},
      {prefix + "bytes_lost", std::to_string(torn.bytes_lost)},
      {prefix + "record_size", std::to_string(torn.record_size)},
      {prefix + "records_kept", std::to_string(torn.records_kept)},
      {prefix + "waited_ms", std::to_string(torn.waited_ms)},
  };
  if (!torn.perf_map.empty()) m.emplace_back(prefix + "perf_map", torn.perf_map);
  m.emplace_back(prefix + "code_count", std::to_string(torn.code_count));
  for (size_t i = 0; i < torn.code.size(); ++i) {
    const TornJitCode& c = torn.code[i];
    m.emplace_back(prefix + "code." + std::to_string(i + 1),
                   Hex(c.address) + " " + Hex(c.size) + " " + c.name);
  }
  return m;
}

Result<std::vector<TornJitdump>> ParseTornJitdumps(
    const std::vector<std::pair<std::string, std::string>>& metadata, const std::string& source) {
  std::map<uint64_t, TornJitdump> by_index;
  std::map<uint64_t, std::map<uint64_t, TornJitCode>> code_by_index;  // ordered by code.<i>
  for (const auto& entry : metadata) {
    const std::string& key = entry.first;
    const std::string& value = entry.second;
    std::string_view rest(key);
    if (rest.substr(0, kPrefix.size()) != kPrefix) continue;
    rest.remove_prefix(kPrefix.size());
    const size_t dot = rest.find('.');
    uint64_t index = 0;
    auto bad = [&] {
      return Unexpected(Errc::kCorrupt, source + ": metadata " + key + " = '" + value +
                                            "' is not what FORMAT.md describes (jit.torn.*)");
    };
    if (dot == std::string_view::npos || !ParseNumber(rest.substr(0, dot), 10, &index)) {
      return bad();
    }
    const std::string_view field = rest.substr(dot + 1);
    TornJitdump& torn = by_index[index];
    uint64_t number = 0;
    auto numeric = [&](uint64_t* out) {
      if (!ParseNumber(value, 10, &number)) return false;
      *out = number;
      return true;
    };
    bool ok = true;
    if (field == "pid") {
      ok = ParseNumber(value, 10, &number) && number <= UINT32_MAX;
      torn.pid = static_cast<uint32_t>(number);
    } else if (field == "jitdump") {
      torn.jitdump = value;
    } else if (field == "perf_map") {
      torn.perf_map = value;
    } else if (field == "bytes_kept") {
      ok = numeric(&torn.bytes_kept);
    } else if (field == "bytes_lost") {
      ok = numeric(&torn.bytes_lost);
    } else if (field == "record_size") {
      ok = numeric(&torn.record_size);
    } else if (field == "records_kept") {
      ok = numeric(&torn.records_kept);
    } else if (field == "waited_ms") {
      ok = numeric(&torn.waited_ms);
    } else if (field == "code_count") {
      ok = numeric(&torn.code_count);
    } else if (field.substr(0, 5) == "code.") {
      uint64_t i = 0;
      TornJitCode code;
      ok = ParseNumber(field.substr(5), 10, &i) && ParseCode(value, &code);
      code_by_index[index][i] = std::move(code);
    }  // other fields: a newer writer's, ignored
    if (!ok) return bad();
  }
  std::vector<TornJitdump> result;
  for (auto& [index, torn] : by_index) {
    for (auto& [i, code] : code_by_index[index]) torn.code.push_back(std::move(code));
    result.push_back(std::move(torn));
  }
  return result;
}

}  // namespace ptscope::format
