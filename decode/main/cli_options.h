// Parsers for pt-decode's option values (--threads, --time-range). Errors are one line naming
// the option and the value, and say what is expected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::decode {

// "--threads 12,345": comma-separated decimal tids or pids (1 .. 2^32-1), duplicates dropped,
// in the order given. Empty entries ("1,,2", "1,") are errors.
Result<std::vector<uint32_t>> ParseThreadList(const std::string& text);

// A time relative to the capture start: decimal with an optional fraction and a unit,
// "250ns", "1.5us", "2ms", "0.25s"; a bare "0" needs no unit. Sub-nanosecond fractions and
// values beyond 2^64-1 ns are errors. `option` names the option in messages.
Result<uint64_t> ParseRelativeTime(std::string_view text, const std::string& option);

// "--jobs N" (or -j): decimal 1 .. kMaxJobs. Each job holds a decode worker's caches and two
// units of events in flight, so the bound keeps a mistyped value from asking for gigabytes (or
// 100000 threads); more jobs than cores is allowed (the output is the same for every value).
inline constexpr unsigned kMaxJobs = 256;
Result<unsigned> ParseJobs(const std::string& text);

// "--unit-bytes N" (a test option): decimal, 1 byte .. 1 GiB.
Result<size_t> ParseUnitBytes(const std::string& text);

struct TimeRange {
  uint64_t from_ns = 0;
  uint64_t to_ns = UINT64_MAX;
};
// "--time-range START:END", either side may be empty ("2ms:", ":500us"); START < END.
Result<TimeRange> ParseTimeRange(const std::string& text);

}  // namespace ptscope::decode
