// The intel_pt perf_event_attr for every option, checked bit by bit against the layout in
// reference/intel-pt.md §3.3 (pt 0, cyc 1, mtc 9, tsc 10, noretcomp 11, branch 13,
// mtc_period 14-17, cyc_thresh 19-22, psb_period 24-27). The expected words are written out
// here from that table, not computed with the code under test.
#include "pt_config.h"

#include <doctest/doctest.h>

namespace ptscope::record {
namespace {

// Caps of a Skylake-class part (values as its sysfs shows them).
const std::map<std::string, std::string> kSkylakeCaps = {
    {"psb_cyc", "1"}, {"mtc", "1"}, {"mtc_periods", "249"}, {"cycle_thresholds", "3fff"},
    {"psb_periods", "3f"}, {"ip_filtering", "1"}, {"num_address_ranges", "2"}};

uint64_t ConfigFor(const PtOptions& options,
                   const std::map<std::string, std::string>& caps = kSkylakeCaps) {
  auto config = ResolvePtConfig(options, caps);
  REQUIRE(config);
  return EncodePtConfig(*config);
}

}  // namespace

TEST_CASE("--timing low: pt,branch,tsc,mtc,mtc_period=3,psb_period=3, no cyc") {
  PtOptions o;
  o.timing = Timing::kLow;
  // pt(0x1) | mtc(0x200) | tsc(0x400) | branch(0x2000) | mtc_period 3<<14 (0xc000) |
  // psb_period 3<<24 (0x3000000)
  CHECK(ConfigFor(o) == 0x300e601);
}

TEST_CASE("--timing normal: cyc=1,cyc_thresh=1,mtc_period=0") {
  PtOptions o;  // normal is the default
  // pt | cyc(0x2) | mtc | tsc | branch | cyc_thresh 1<<19 (0x80000) | psb_period 3<<24
  CHECK(ConfigFor(o) == 0x3082603);
}

TEST_CASE("--timing high: normal + noretcomp") {
  PtOptions o;
  o.timing = Timing::kHigh;
  CHECK(ConfigFor(o) == 0x3082603 + 0x800);
}

TEST_CASE("--no-retcomp sets bit 11 only") {
  PtOptions o;
  o.timing = Timing::kLow;
  o.no_retcomp = true;
  CHECK(ConfigFor(o) == (0x300e601 | 0x800));
}

TEST_CASE("--psb-period lands in bits 24-27") {
  PtOptions o;
  o.timing = Timing::kLow;
  o.psb_period = 5;
  CHECK(ConfigFor(o) == 0x500e601);
  o.psb_period = 0;
  CHECK(ConfigFor(o) == 0x000e601);
}

TEST_CASE("--mtc-period lands in bits 14-17") {
  PtOptions o;
  o.timing = Timing::kLow;
  o.mtc_period = 9;  // allowed by mask 0x249 (bits 0, 3, 6, 9)
  CHECK(ConfigFor(o) == (0x3002601 | (9u << 14)));
  o.mtc_period = 2;  // not in the mask
  auto bad = ResolvePtConfig(o, kSkylakeCaps);
  REQUIRE(!bad);
  CHECK(bad.error().message ==
        "--mtc-period 2 is not supported by this CPU (caps/mtc_periods = 0x249: bit v set means "
        "value v is allowed)");
}

TEST_CASE("--cyc-thresh lands in bits 19-22 and turns cyc on") {
  PtOptions o;
  o.timing = Timing::kLow;
  o.cyc_thresh = 13;
  CHECK(ConfigFor(o) == (0x300e601 | 0x2 | (13u << 19)));
  o.cyc_thresh = 16;
  auto bad = ResolvePtConfig(o, kSkylakeCaps);
  REQUIRE(!bad);
  CHECK(bad.error().message == "--cyc-thresh 16 is out of range: the field holds 0..15");
}

TEST_CASE("without psb_cyc, normal timing falls back to low with a warning") {
  std::map<std::string, std::string> caps = kSkylakeCaps;
  caps.at("psb_cyc").assign(1, '0');  // (operator= trips a GCC 12 -Wrestrict false positive)
  PtOptions o;
  auto config = ResolvePtConfig(o, caps);
  REQUIRE(config);
  CHECK(EncodePtConfig(*config) == 0x300e601);
  REQUIRE(config->warnings.size() == 1);
  CHECK(config->warnings[0].rfind("this CPU has no CYC packets (caps/psb_cyc = 0)", 0) == 0);
  o.cyc_thresh = 1;
  CHECK(!ResolvePtConfig(o, caps));
}

TEST_CASE("the attr: type, size, user/kernel exclusion, sample layout, enable_on_exec") {
  PtOptions o;
  o.timing = Timing::kLow;
  auto config = ResolvePtConfig(o, kSkylakeCaps);
  REQUIRE(config);
  perf_event_attr attr = BuildPtAttr(*config, {.pmu_type = 9, .enable_on_exec = true,
                                               .snapshot = true, .aux_bytes = 1 << 22});
  CHECK(attr.type == 9);
  CHECK(attr.size == sizeof(perf_event_attr));
  CHECK(attr.config == 0x300e601);
  CHECK(attr.sample_type == 0x10086);
  CHECK(unsigned(attr.sample_id_all) == 1);
  CHECK(unsigned(attr.disabled) == 1);
  CHECK(unsigned(attr.enable_on_exec) == 1);
  CHECK(unsigned(attr.exclude_kernel) == 1);
  CHECK(unsigned(attr.exclude_user) == 0);
  CHECK(unsigned(attr.exclude_hv) == 1);
  CHECK(attr.aux_watermark == 0);
  CHECK(unsigned(attr.inherit) == 0);

  o.kernel = true;
  config = ResolvePtConfig(o, kSkylakeCaps);
  REQUIRE(config);
  attr = BuildPtAttr(*config, {.pmu_type = 9, .enable_on_exec = false, .snapshot = false,
                               .aux_bytes = 1 << 22});
  CHECK(unsigned(attr.exclude_kernel) == 0);
  CHECK(unsigned(attr.exclude_user) == 0);
  CHECK(unsigned(attr.enable_on_exec) == 0);
  CHECK(attr.aux_watermark == (1u << 20));
}

TEST_CASE("pt.* metadata mirrors the decided config") {
  PtOptions o;
  auto config = ResolvePtConfig(o, kSkylakeCaps);
  REQUIRE(config);
  auto meta = PtConfigMetadata(*config, EncodePtConfig(*config));
  std::vector<std::pair<std::string, std::string>> expected = {
      {"pt.config", "0x3082603"}, {"pt.tsc", "1"},       {"pt.mtc", "1"},
      {"pt.mtc_period", "0"},     {"pt.cyc", "1"},       {"pt.cyc_thresh", "1"},
      {"pt.psb_period", "16384"}, {"pt.noretcomp", "0"}, {"pt.branch", "1"},
      {"pt.user", "1"},           {"pt.kernel", "0"}};
  CHECK(meta == expected);
}

TEST_CASE("ParseTiming") {
  CHECK(*ParseTiming("low") == Timing::kLow);
  CHECK(*ParseTiming("high") == Timing::kHigh);
  auto bad = ParseTiming("fast");
  REQUIRE(!bad);
  CHECK(bad.error().message == "--timing 'fast' is not one of low, normal, high");
}

TEST_CASE("defect 10: full mode's aux_watermark is a quarter of the AUX area, clamped to u32") {
  PtConfig config;
  PtAttrRequest request{9, false, /*snapshot=*/false, 8ull << 20};
  CHECK(BuildPtAttr(config, request).aux_watermark == 2u << 20);
  // perf clamps (intel_pt_recording_options): a quarter of 16 GiB does not fit attr's u32 and
  // used to wrap to almost nothing, waking the reader on every few bytes.
  request.aux_bytes = (16ull << 30) + 4 * 4096;
  CHECK(BuildPtAttr(config, request).aux_watermark == UINT32_MAX);
}

}  // namespace ptscope::record
