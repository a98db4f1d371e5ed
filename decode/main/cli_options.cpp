#include "cli_options.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace ptscope::decode {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Decimal digits to a value, false on overflow or a non-digit.
bool ParseDigits(std::string_view digits, uint64_t& value) {
  value = 0;
  for (char c : digits) {
    if (!IsDigit(c)) return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - d) / 10) return false;
    value = value * 10 + d;
  }
  return true;
}

Unexpected TimeError(const std::string& option, std::string_view text, const std::string& why) {
  return Unexpected(Errc::kInvalidArgument,
                    option + " '" + std::string(text) + "': " + why +
                        " (times are relative to the capture start, with a unit: ns, us, ms or "
                        "s, e.g. 2ms:5ms, 1.5s:, :500us)");
}

// One time, or a reason (naming `text`) in `why`.
std::optional<uint64_t> ParseTime(std::string_view text, std::string& why) {
  const std::string quoted = "'" + std::string(text) + "'";
  size_t number_end = 0;
  while (number_end < text.size() && (IsDigit(text[number_end]) || text[number_end] == '.')) {
    ++number_end;
  }
  std::string_view number = text.substr(0, number_end), unit = text.substr(number_end);
  size_t dot = number.find('.');
  std::string_view whole = number.substr(0, dot);
  std::string_view fraction = dot == std::string_view::npos ? "" : number.substr(dot + 1);
  if (number.empty() || fraction.find('.') != std::string_view::npos ||
      (whole.empty() && fraction.empty()) || (dot != std::string_view::npos && fraction.empty())) {
    why = quoted + " is not a number with a unit";
    return std::nullopt;
  }
  uint64_t scale = 0;
  if (unit == "ns") scale = 1;
  else if (unit == "us") scale = 1'000;
  else if (unit == "ms") scale = 1'000'000;
  else if (unit == "s") scale = 1'000'000'000;
  else if (unit.empty()) {
    uint64_t value = 0;
    bool zero = ParseDigits(whole, value) && value == 0 &&
                fraction.find_first_not_of('0') == std::string_view::npos;
    if (zero) return uint64_t{0};
    why = quoted + " has no unit";
    return std::nullopt;
  } else {
    why = "unknown unit '" + std::string(unit) + "' in " + quoted;
    return std::nullopt;
  }
  uint64_t whole_value = 0, fraction_value = 0, fraction_scale = 1;
  bool fits = ParseDigits(whole, whole_value) && whole_value <= UINT64_MAX / scale;
  for (char c : fraction) {
    if (fraction_scale >= scale) {  // a digit below one nanosecond
      if (c == '0') continue;
      why = quoted + " is finer than 1 ns";
      return std::nullopt;
    }
    fraction_scale *= 10;
    fraction_value = fraction_value * 10 + static_cast<uint64_t>(c - '0');
  }
  uint64_t extra = fraction_value * (scale / fraction_scale);
  if (!fits || whole_value * scale > UINT64_MAX - extra) {
    why = quoted + " is too large";
    return std::nullopt;
  }
  return whole_value * scale + extra;
}

}  // namespace

Result<std::vector<uint32_t>> ParseThreadList(const std::string& text) {
  std::vector<uint32_t> ids;
  auto bad = [&](const std::string& why) -> Result<std::vector<uint32_t>> {
    return Unexpected(Errc::kInvalidArgument,
                      "--threads '" + text + "': " + why +
                          " (expected comma-separated thread or process ids, e.g. 1234,1240)");
  };
  if (text.empty()) return bad("no id given");
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string_view item = std::string_view(text).substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) return bad("empty entry");
    uint64_t id = 0;
    if (!ParseDigits(item, id)) return bad("'" + std::string(item) + "' is not a decimal id");
    if (id == 0 || id > UINT32_MAX) {
      return bad("'" + std::string(item) + "' is out of range (1 to 4294967295)");
    }
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(static_cast<uint32_t>(id));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

Result<unsigned> ParseJobs(const std::string& text) {
  uint64_t jobs = 0;
  if (!ParseDigits(text, jobs) || jobs == 0 || jobs > kMaxJobs) {
    return Unexpected(Errc::kInvalidArgument,
                      "--jobs '" + text + "': expected a number of decoder threads from 1 to " +
                          std::to_string(kMaxJobs) + " (default: one per core)");
  }
  return static_cast<unsigned>(jobs);
}

Result<size_t> ParseUnitBytes(const std::string& text) {
  uint64_t bytes = 0;
  if (!ParseDigits(text, bytes) || bytes == 0 || bytes > (uint64_t{1} << 30)) {
    return Unexpected(Errc::kInvalidArgument,
                      "--unit-bytes '" + text + "': expected 1 to 1073741824 bytes");
  }
  return static_cast<size_t>(bytes);
}

Result<uint64_t> ParseRelativeTime(std::string_view text, const std::string& option) {
  std::string why;
  std::optional<uint64_t> ns = ParseTime(text, why);
  if (!ns) return TimeError(option, text, why);
  return *ns;
}

Result<TimeRange> ParseTimeRange(const std::string& text) {
  const std::string option = "--time-range";
  size_t colon = text.find(':');
  if (colon == std::string::npos || text.find(':', colon + 1) != std::string::npos) {
    return TimeError(option, text, "expected START:END, one ':' (either side may be empty)");
  }
  TimeRange range;
  std::string_view from = std::string_view(text).substr(0, colon);
  std::string_view to = std::string_view(text).substr(colon + 1);
  std::string why;
  for (auto [part, value] : {std::pair{from, &range.from_ns}, std::pair{to, &range.to_ns}}) {
    if (part.empty()) continue;
    std::optional<uint64_t> ns = ParseTime(part, why);
    if (!ns) return TimeError(option, text, why);
    *value = *ns;
  }
  if (range.from_ns >= range.to_ns) {
    return TimeError(option, text, "the start must be before the end");
  }
  return range;
}

}  // namespace ptscope::decode
