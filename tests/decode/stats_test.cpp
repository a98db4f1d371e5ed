// The stats table (ptscope/decode.h): every stat described once, names stable and machine-friendly,
// gap causes mapped to their counts.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "ptscope/decode.h"

namespace ptscope::decode {
namespace {

TEST_CASE("every stat has a unique snake_case name, a severity and an explanation") {
  std::set<std::string> names;
  for (size_t i = 0; i < kStatCount; ++i) {
    const StatDescription& d = Describe(static_cast<Stat>(i));
    const std::string name = d.name;
    CAPTURE(name);
    CHECK(!name.empty());
    CHECK(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos);
    CHECK(names.insert(name).second);
    CHECK(std::string(d.explanation).size() > 5);
  }
  // Spot checks that the table is in Stat's order.
  CHECK(std::string(Describe(Stat::kOverflowGaps).name) == "overflow_gaps");
  CHECK(std::string(Describe(Stat::kUnattributedInstructions).name) == "unattributed_instructions");
  CHECK(std::string(Describe(Stat::kCalls).name) == "calls");
  CHECK(std::string(Describe(Stat::kClampedTimes).name) == "clamped_times");
  CHECK(std::string(Describe(Stat::kPacketFallbackUnits).name) == "packet_fallback_units");
  CHECK(Describe(Stat::kDecodeErrorGaps).severity == StatSeverity::kDataLoss);
  CHECK(Describe(Stat::kReanchors).severity == StatSeverity::kInfo);
}

TEST_CASE("each gap cause has its count, and gaps() sums them") {
  DecodeStats stats;
  stats[GapStat(GapCause::kOverflow)] += 1;
  stats[GapStat(GapCause::kLostData)] += 2;
  stats[GapStat(GapCause::kDecodeError)] += 4;
  stats[GapStat(GapCause::kMissingCode)] += 8;
  stats[Stat::kCalls] += 100;
  CHECK(stats[Stat::kOverflowGaps] == 1);
  CHECK(stats[Stat::kLostDataGaps] == 2);
  CHECK(stats[Stat::kDecodeErrorGaps] == 4);
  CHECK(stats[Stat::kMissingCodeGaps] == 8);
  CHECK(stats.gaps() == 15);
  CHECK(GapStat(GapCause::kTraceStart) == Stat::kCount);
  DecodeStats sum;
  sum.Add(stats);
  sum.Add(stats);
  CHECK(sum[Stat::kCalls] == 200);
  CHECK(sum.gaps() == 30);
}

}  // namespace
}  // namespace ptscope::decode
