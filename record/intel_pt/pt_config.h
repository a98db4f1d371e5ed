// From pt-record's options to the perf_event_attr of the intel_pt PMU. The config bit layout is
// the kernel's (arch/x86/events/intel/pt.c format attributes, see reference/intel-pt.md §3.3);
// validation uses the PMU's caps so that a bad value fails here, with a sentence, instead of
// as EINVAL from perf_event_open.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ptscope/result.h"
#include "sideband_layout.h"

namespace ptscope::record {

// magic-trace's --timer-resolution levels: low = no CYC; normal = cyc=1,cyc_thresh=1,
// mtc_period=0; high = normal + noretcomp.
enum class Timing { kLow, kNormal, kHigh };
Result<Timing> ParseTiming(const std::string& text);

struct PtOptions {
  Timing timing = Timing::kNormal;
  std::optional<uint32_t> psb_period;  // raw 4-bit field: 2^(v+11) bytes between PSBs
  std::optional<uint32_t> mtc_period;  // raw 4-bit field: MTC every CTC/2^v
  std::optional<uint32_t> cyc_thresh;  // raw 4-bit field: CYC after 2^(v-1) cycles
  bool no_retcomp = false;
  bool kernel = false;  // trace ring 0 too (--kernel)
  bool user = true;
};

// The decided packet configuration (what ends up in attr.config and in the pt.* metadata).
struct PtConfig {
  bool pt = true;
  bool branch = true;
  bool tsc = true;
  bool mtc = false;
  bool cyc = false;
  bool noretcomp = false;
  uint32_t mtc_period = 0;
  uint32_t cyc_thresh = 0;
  uint32_t psb_period = 0;
  bool user = true;
  bool kernel = false;
  std::vector<std::string> warnings;  // e.g. CYC unavailable, fell back to --timing low
};

// Config bit positions of the intel_pt PMU (sysfs format/*).
namespace ptbits {
inline constexpr int kPt = 0, kCyc = 1, kMtc = 9, kTsc = 10, kNoRetComp = 11, kBranch = 13;
inline constexpr int kMtcPeriod = 14, kCycThresh = 19, kPsbPeriod = 24;
}  // namespace ptbits

// `caps` is the PMU's caps directory (name → text); empty means unknown (trust the values).
Result<PtConfig> ResolvePtConfig(const PtOptions& options,
                                 const std::map<std::string, std::string>& caps);
uint64_t EncodePtConfig(const PtConfig& config);


struct PtAttrRequest {
  uint32_t pmu_type = 0;
  bool enable_on_exec = false;  // run mode: start tracing at the target's exec
  bool snapshot = true;         // overwrite-mode AUX (only affects the watermark)
  uint64_t aux_bytes = 0;
};
perf_event_attr BuildPtAttr(const PtConfig& config, const PtAttrRequest& request);

// The pt.* metadata entries for an archive.
std::vector<std::pair<std::string, std::string>> PtConfigMetadata(const PtConfig& config,
                                                                  uint64_t encoded);

}  // namespace ptscope::record
