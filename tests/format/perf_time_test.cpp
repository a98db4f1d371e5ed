#include "ptscope/perf_time.h"

#include <doctest/doctest.h>

#include <cstdint>

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

}  // namespace
}  // namespace ptscope::perf
