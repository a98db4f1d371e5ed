// MetadataNumber: how a number is read from capture metadata.
// ParseTimeConversion: the one place the time.* metadata of a capture is read and checked. Both
// readers (ReadArchive, ImportPerfData) call it, and every consumer (decoder, JIT time map,
// perf.data export) takes the checked Archive::time instead of parsing the keys again.
#include <charconv>
#include <cstdint>

#include "ptscope/format.h"

namespace ptscope::format {

Result<std::optional<uint64_t>> MetadataNumber(
    const std::vector<std::pair<std::string, std::string>>& metadata, std::string_view key,
    const std::string& source) {
  const std::string* text = nullptr;
  for (const auto& [k, v] : metadata) {
    if (k == key) text = &v;
  }
  if (text == nullptr || text->empty()) return std::optional<uint64_t>();
  const char* begin = text->data();
  const char* end = begin + text->size();
  int base = 10;
  if (text->size() > 2 && (*text)[0] == '0' && ((*text)[1] == 'x' || (*text)[1] == 'X')) {
    begin += 2;
    base = 16;
  }
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value, base);
  if (ec != std::errc() || ptr != end) {
    return MakeError(Errc::kCorrupt, source + ": metadata " + std::string(key) + "=\"" + *text +
                                         "\" is not a number");
  }
  return std::optional<uint64_t>(value);
}
namespace {

// MetadataNumber, with what a bad time.* value means for the user.
Result<std::optional<uint64_t>> Number(
    const std::vector<std::pair<std::string, std::string>>& metadata, std::string_view key,
    const std::string& source) {
  auto value = MetadataNumber(metadata, key, source);
  if (!value) {
    return MakeError(value.error().code,
                     value.error().message + " (the capture's time conversion is damaged; "
                                             "pt-archive info lists the metadata)");
  }
  return value;
}

}  // namespace

Result<std::optional<TimeConversion>> ParseTimeConversion(
    const std::vector<std::pair<std::string, std::string>>& metadata, const std::string& source) {
  PTSCOPE_ASSIGN_OR_RETURN(std::optional<uint64_t> mult, Number(metadata, "time.mult", source));
  PTSCOPE_ASSIGN_OR_RETURN(std::optional<uint64_t> shift, Number(metadata, "time.shift", source));
  PTSCOPE_ASSIGN_OR_RETURN(std::optional<uint64_t> zero, Number(metadata, "time.zero", source));
  PTSCOPE_ASSIGN_OR_RETURN(std::optional<uint64_t> cap_zero,
                           Number(metadata, "time.cap_user_time_zero", source));
  if (mult.value_or(0) == 0) return std::optional<TimeConversion>();
  const char* advice = " (the capture's time conversion is damaged; pt-archive info lists the "
                       "metadata)";
  if (*mult > UINT32_MAX) {
    return MakeError(Errc::kCorrupt, source + ": metadata time.mult=" + std::to_string(*mult) +
                                         " does not fit perf's 32-bit time_mult (at most " +
                                         std::to_string(UINT32_MAX) + ")" + advice);
  }
  if (shift.value_or(0) > 63) {
    return MakeError(Errc::kCorrupt, source + ": metadata time.shift=" + std::to_string(*shift) +
                                         " is out of range (0..63)" + advice);
  }
  TimeConversion time;
  time.perf = perf::PerfTime{static_cast<uint16_t>(shift.value_or(0)),
                             static_cast<uint32_t>(*mult), zero.value_or(0)};
  time.cap_user_time_zero = cap_zero.value_or(0) != 0;
  return std::optional<TimeConversion>(time);
}

}  // namespace ptscope::format
