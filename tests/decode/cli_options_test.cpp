// pt-decode's option values: --threads lists and --time-range windows, exact values and errors.
#include "cli_options.h"

#include <doctest/doctest.h>

namespace ptscope::decode {
namespace {

const std::string kTimeHint =
    " (times are relative to the capture start, with a unit: ns, us, ms or s, e.g. 2ms:5ms, "
    "1.5s:, :500us)";

std::string RangeError(const std::string& text) {
  auto range = ParseTimeRange(text);
  REQUIRE(!range);
  return range.error().message;
}

TEST_CASE("--threads: ids in the order given, duplicates dropped") {
  CHECK(ParseThreadList("12").value() == std::vector<uint32_t>{12});
  CHECK(ParseThreadList("12,345,12,7").value() == std::vector<uint32_t>{12, 345, 7});
  CHECK(ParseThreadList("4294967295").value() == std::vector<uint32_t>{4294967295u});
}

TEST_CASE("--threads: errors name the value and what is wrong") {
  const std::string hint = " (expected comma-separated thread or process ids, e.g. 1234,1240)";
  CHECK(ParseThreadList("").error().message == "--threads '': no id given" + hint);
  CHECK(ParseThreadList("1,,2").error().message == "--threads '1,,2': empty entry" + hint);
  CHECK(ParseThreadList("1,").error().message == "--threads '1,': empty entry" + hint);
  CHECK(ParseThreadList("1,x2").error().message ==
        "--threads '1,x2': 'x2' is not a decimal id" + hint);
  CHECK(ParseThreadList("-3").error().message == "--threads '-3': '-3' is not a decimal id" + hint);
  CHECK(ParseThreadList("0").error().message ==
        "--threads '0': '0' is out of range (1 to 4294967295)" + hint);
  CHECK(ParseThreadList("4294967296").error().message ==
        "--threads '4294967296': '4294967296' is out of range (1 to 4294967295)" + hint);
  CHECK(ParseThreadList("99999999999999999999999").error().message ==
        "--threads '99999999999999999999999': '99999999999999999999999' is not a decimal id" +
            hint);
}

TEST_CASE("--time-range: units, fractions and open ends") {
  auto range = [](const std::string& text) {
    auto r = ParseTimeRange(text);
    REQUIRE(r);
    return std::pair{r->from_ns, r->to_ns};
  };
  CHECK(range("2ms:5ms") == std::pair<uint64_t, uint64_t>{2'000'000, 5'000'000});
  CHECK(range("2ms:") == std::pair<uint64_t, uint64_t>{2'000'000, UINT64_MAX});
  CHECK(range(":500us") == std::pair<uint64_t, uint64_t>{0, 500'000});
  CHECK(range(":") == std::pair<uint64_t, uint64_t>{0, UINT64_MAX});
  CHECK(range("0:1s") == std::pair<uint64_t, uint64_t>{0, 1'000'000'000});
  CHECK(range("1.5us:0.25s") == std::pair<uint64_t, uint64_t>{1'500, 250'000'000});
  CHECK(range(".5ms:1ms") == std::pair<uint64_t, uint64_t>{500'000, 1'000'000});
  CHECK(range("0.000000001s:7ns") == std::pair<uint64_t, uint64_t>{1, 7});
  CHECK(range("1.000ns:2ns") == std::pair<uint64_t, uint64_t>{1, 2});  // zeros below 1 ns are fine
}

TEST_CASE("--time-range: errors name the option, the value and the part that is wrong") {
  CHECK(RangeError("2ms") == "--time-range '2ms': expected START:END, one ':' (either side may "
                             "be empty)" + kTimeHint);
  CHECK(RangeError("1:2:3") == "--time-range '1:2:3': expected START:END, one ':' (either side "
                               "may be empty)" + kTimeHint);
  CHECK(RangeError("5ms:2ms") == "--time-range '5ms:2ms': the start must be before the end" +
                                     kTimeHint);
  CHECK(RangeError("2ms:2ms") == "--time-range '2ms:2ms': the start must be before the end" +
                                     kTimeHint);
  CHECK(RangeError("2xs:") == "--time-range '2xs:': unknown unit 'xs' in '2xs'" + kTimeHint);
  CHECK(RangeError(":100") == "--time-range ':100': '100' has no unit" + kTimeHint);
  CHECK(RangeError("ms:") == "--time-range 'ms:': 'ms' is not a number with a unit" + kTimeHint);
  CHECK(RangeError("1.2.3ms:") == "--time-range '1.2.3ms:': '1.2.3ms' is not a number with a "
                                  "unit" + kTimeHint);
  CHECK(RangeError("1.ms:") == "--time-range '1.ms:': '1.ms' is not a number with a unit" +
                                   kTimeHint);
  CHECK(RangeError("-1ms:") == "--time-range '-1ms:': '-1ms' is not a number with a unit" +
                                   kTimeHint);
  CHECK(RangeError("0.5ns:") == "--time-range '0.5ns:': '0.5ns' is finer than 1 ns" + kTimeHint);
  CHECK(RangeError("1.0000000001s:") ==
        "--time-range '1.0000000001s:': '1.0000000001s' is finer than 1 ns" + kTimeHint);
  CHECK(RangeError("18446744073709551616ns:") ==
        "--time-range '18446744073709551616ns:': '18446744073709551616ns' is too large" +
            kTimeHint);
  CHECK(RangeError(":18446744074s") ==
        "--time-range ':18446744074s': '18446744074s' is too large" + kTimeHint);
}

}  // namespace
}  // namespace ptscope::decode
