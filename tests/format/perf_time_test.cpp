#include "ptscope/perf_time.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ptscope/format.h"

namespace ptscope::perf {
namespace {

// A 1.5 GHz TSC as the kernel describes it (mult / 2^shift = 2/3 ns per tick), with a zero
// offset. Expected values were computed independently with exact integer arithmetic:
// zero + floor(tsc * mult / 2^shift) and floor((ns - zero) * 2^shift / mult).
constexpr PerfTime kHost{31, 1431655765, 1234567890123};

TEST_CASE("TscToNs: small values, at and around the split point") {
  CHECK(kHost.TscToNs(0) == 1234567890123u);
  CHECK(kHost.TscToNs(1) == 1234567890123u);
  CHECK(kHost.TscToNs(3) == 1234567890124u);
  CHECK(kHost.TscToNs(0x7fffffff) == 1235999545887u);  // all in the remainder
  CHECK(kHost.TscToNs(0x80000000) == 1235999545888u);  // all in the quotient
}

TEST_CASE("TscToNs: large TSC values where tsc * mult overflows 64 bits") {
  // 0x0123456789abcdef * 1431655765 is about 1.2e26; the naive (tsc * mult) >> shift would
  // give 1238958301135 here.
  CHECK(kHost.TscToNs(0x0123456789abcdefu) == 54658254032822223u);
  CHECK(kHost.TscToNs(UINT64_MAX) == 12297830614177613002u);
}

TEST_CASE("TscToNs: pt-emulate's 1 GHz virtual clock and a zero shift") {
  constexpr PerfTime kVirtual{20, 1u << 20, 0};  // 1 tick = 1 ns
  CHECK(kVirtual.TscToNs(0x0123456789abcdefu) == 0x0123456789abcdefu);
  constexpr PerfTime kUnshifted{0, 3, 7};
  CHECK(kUnshifted.TscToNs(12345) == 37042u);
}

TEST_CASE("NsToTsc: the inverse rounds down and clamps times before zero") {
  CHECK(kHost.NsToTsc(0) == 0u);                 // before zero
  CHECK(kHost.NsToTsc(1234567890123) == 0u);     // at zero
  CHECK(kHost.NsToTsc(1234567890124) == 1u);
  CHECK(kHost.NsToTsc(1234567890125) == 3u);
  CHECK(kHost.NsToTsc(12345678901234567) == 18516666504327913u);
  CHECK(kHost.NsToTsc(10000000000000000000u) == 14999998151640624039u);
  constexpr PerfTime kUnshifted{0, 3, 7};
  CHECK(kUnshifted.NsToTsc(37044) == 12345u);
  CHECK(kUnshifted.NsToTsc(37045) == 12346u);
}

TEST_CASE("NsToTsc undoes TscToNs when the TSC ticks slower than 1 ns") {
  constexpr PerfTime kSlow{10, 3072, 500};  // 3 ns per tick
  CHECK(kSlow.TscToNs(1000000) == 3000500u);
  CHECK(kSlow.NsToTsc(3000500) == 1000000u);
  CHECK(kSlow.NsToTsc(3000502) == 1000000u);
  CHECK(kSlow.NsToTsc(3000503) == 1000001u);
}

TEST_CASE("NsToTsc is exact for shifts above 32, up to 63, and clamps at the largest TSC") {
  // floor(1000 * 2^40 / 3) and floor(5 * 2^63 / 7), computed independently.
  constexpr PerfTime kWide{40, 3, 0};
  CHECK(kWide.NsToTsc(1000) == 366503875925333u);
  constexpr PerfTime kWidest{63, 7, 0};
  CHECK(kWidest.NsToTsc(5) == 6588122883467697005u);
  CHECK(kWidest.NsToTsc(100) == UINT64_MAX);  // 100 * 2^63 / 7 > 2^64
}

}  // namespace
}  // namespace ptscope::perf

namespace ptscope::format {
namespace {

using Metadata = std::vector<std::pair<std::string, std::string>>;

std::string ParseError(const Metadata& metadata) {
  Result<std::optional<TimeConversion>> parsed = ParseTimeConversion(metadata, "t.ptar");
  REQUIRE_FALSE(parsed.has_value());
  CHECK(parsed.error().code == Errc::kCorrupt);
  return parsed.error().message;
}

TEST_CASE("ParseTimeConversion: the checked conversion, later values winning") {
  Result<std::optional<TimeConversion>> parsed = ParseTimeConversion(
      {{"time.shift", "31"}, {"time.mult", "7"}, {"time.mult", "1431655765"},
       {"time.zero", "0x1f"}, {"time.cap_user_time_zero", "1"}},
      "t.ptar");
  REQUIRE(parsed.has_value());
  REQUIRE(parsed->has_value());
  const TimeConversion& time = **parsed;
  CHECK(time.perf.shift == 31);
  CHECK(time.perf.mult == 1431655765u);
  CHECK(time.perf.zero == 31u);
  CHECK(time.cap_user_time_zero);
  // The largest values perf can hold are accepted.
  parsed = ParseTimeConversion({{"time.shift", "63"}, {"time.mult", "4294967295"}}, "t.ptar");
  REQUIRE(parsed.has_value());
  REQUIRE(parsed->has_value());
  CHECK((*parsed)->perf.shift == 63);
  CHECK((*parsed)->perf.mult == UINT32_MAX);
  CHECK_FALSE((*parsed)->cap_user_time_zero);
}

TEST_CASE("ParseTimeConversion: no conversion recorded") {
  for (const Metadata& none : {Metadata{}, Metadata{{"time.shift", "10"}, {"time.mult", "0"}},
                               Metadata{{"time.mult", ""}}}) {
    Result<std::optional<TimeConversion>> parsed = ParseTimeConversion(none, "t.ptar");
    REQUIRE(parsed.has_value());
    CHECK_FALSE(parsed->has_value());
  }
}

TEST_CASE("ParseTimeConversion: values perf's arithmetic cannot take are refused by name") {
  const std::string advice =
      " (the capture's time conversion is damaged; pt-archive info lists the metadata)";
  // 2^32 was checked as 64 bits, then truncated to 0 and divided by (SIGFPE in export-perf).
  CHECK(ParseError({{"time.mult", "4294967296"}}) ==
        "t.ptar: metadata time.mult=4294967296 does not fit perf's 32-bit time_mult (at most "
        "4294967295)" + advice);
  // A shift of 64 is undefined behaviour in C++.
  CHECK(ParseError({{"time.mult", "1"}, {"time.shift", "64"}}) ==
        "t.ptar: metadata time.shift=64 is out of range (0..63)" + advice);
  CHECK(ParseError({{"time.mult", "1"}, {"time.zero", "-5"}}) ==
        "t.ptar: metadata time.zero=\"-5\" is not a number" + advice);
  CHECK(ParseError({{"time.mult", "18446744073709551616"}}) ==
        "t.ptar: metadata time.mult=\"18446744073709551616\" is not a number" + advice);
  // A bad value is refused even when no conversion would be used.
  CHECK(ParseError({{"time.shift", "1O"}}) ==
        "t.ptar: metadata time.shift=\"1O\" is not a number" + advice);
}

TEST_CASE("MetadataNumber: decimal or 0x-hex u64, the last value of a key, others refused by name") {
  const std::vector<std::pair<std::string, std::string>> metadata = {
      {"cpu.model", "1"}, {"cpu.model", "0x8F"}, {"pt.config", "18446744073709551615"},
      {"cpu.family", ""}, {"cpu.stepping", "0x"}, {"pt.mtc_period", "3 "}};
  auto number = [&](std::string_view key) { return MetadataNumber(metadata, key, "t.ptar"); };
  CHECK(number("cpu.model").value() == std::optional<uint64_t>(0x8f));  // the later value wins
  CHECK(number("pt.config").value() == std::optional<uint64_t>(UINT64_MAX));
  CHECK_FALSE(number("absent").value().has_value());
  CHECK_FALSE(number("cpu.family").value().has_value());  // empty: as if absent
  REQUIRE_FALSE(number("cpu.stepping").has_value());
  CHECK(number("cpu.stepping").error().message ==
        "t.ptar: metadata cpu.stepping=\"0x\" is not a number");
  REQUIRE_FALSE(number("pt.mtc_period").has_value());
  CHECK(number("pt.mtc_period").error().code == Errc::kCorrupt);
  CHECK(number("pt.mtc_period").error().message ==
        "t.ptar: metadata pt.mtc_period=\"3 \" is not a number");
}

}  // namespace
}  // namespace ptscope::format
