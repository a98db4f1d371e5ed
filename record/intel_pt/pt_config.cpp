#include "pt_config.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace ptscope::record {
namespace {

constexpr uint32_t kFieldMax = 15;  // all period fields are 4 bits wide

// The caps value for `name` as a number (bitmasks are hex, flags decimal); nullopt if unknown.
std::optional<uint64_t> CapValue(const std::map<std::string, std::string>& caps,
                                 const std::string& name, int base) {
  auto it = caps.find(name);
  if (it == caps.end()) return std::nullopt;
  uint64_t value = 0;
  const std::string& t = it->second;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value, base);
  if (ec != std::errc() || ptr != t.data() + t.size()) return std::nullopt;
  return value;
}

// Checks a 4-bit field against its width and, when known, the caps bitmask of allowed values.
Status CheckField(const std::map<std::string, std::string>& caps, const char* option,
                  const char* mask_cap, uint32_t value) {
  if (value > kFieldMax)
    return MakeError(Errc::kInvalidArgument, std::string(option) + " " + std::to_string(value) +
                                                 " is out of range: the field holds 0..15");
  auto mask = CapValue(caps, mask_cap, 16);
  if (mask && ((*mask >> value) & 1) == 0) {
    char text[32];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(*mask));
    return MakeError(Errc::kInvalidArgument,
                     std::string(option) + " " + std::to_string(value) +
                         " is not supported by this CPU (caps/" + mask_cap + " = " + text +
                         ": bit v set means value v is allowed)");
  }
  return Ok();
}

}  // namespace

Result<Timing> ParseTiming(const std::string& text) {
  if (text == "low") return Timing::kLow;
  if (text == "normal") return Timing::kNormal;
  if (text == "high") return Timing::kHigh;
  return MakeError(Errc::kInvalidArgument,
                   "--timing '" + text + "' is not one of low, normal, high");
}

Result<PtConfig> ResolvePtConfig(const PtOptions& options,
                                 const std::map<std::string, std::string>& caps) {
  PtConfig c;
  c.user = options.user;
  c.kernel = options.kernel;
  if (!c.user && !c.kernel)
    return MakeError(Errc::kInvalidArgument, "neither user nor kernel tracing is enabled");
  Timing timing = options.timing;
  bool cyc_capable = CapValue(caps, "psb_cyc", 10).value_or(1) != 0;
  bool mtc_capable = CapValue(caps, "mtc", 10).value_or(1) != 0;
  if (timing != Timing::kLow && !cyc_capable) {
    if (options.cyc_thresh)
      return MakeError(Errc::kInvalidArgument,
                       "--cyc-thresh needs CYC packets, which this CPU lacks (caps/psb_cyc = 0)");
    c.warnings.push_back("this CPU has no CYC packets (caps/psb_cyc = 0): using --timing low "
                         "(about 1 us resolution instead of about 10 ns)");
    timing = Timing::kLow;
  }
  c.mtc = mtc_capable;
  if (!mtc_capable) c.warnings.push_back("this CPU has no MTC packets (caps/mtc = 0)");
  if (timing == Timing::kLow) {
    c.mtc_period = 3;  // perf's default
  } else {
    c.cyc = true;
    c.cyc_thresh = 1;
    c.mtc_period = 0;
  }
  c.noretcomp = timing == Timing::kHigh || options.no_retcomp;
  if (CapValue(caps, "psb_periods", 16).value_or(1u << 3) & (1u << 3)) c.psb_period = 3;
  if (options.mtc_period) {
    if (!mtc_capable)
      return MakeError(Errc::kInvalidArgument,
                       "--mtc-period needs MTC packets, which this CPU lacks (caps/mtc = 0)");
    PTSCOPE_TRY(CheckField(caps, "--mtc-period", "mtc_periods", *options.mtc_period));
    c.mtc_period = *options.mtc_period;
  }
  if (options.cyc_thresh) {
    PTSCOPE_TRY(CheckField(caps, "--cyc-thresh", "cycle_thresholds", *options.cyc_thresh));
    c.cyc = true;
    c.cyc_thresh = *options.cyc_thresh;
  }
  if (options.psb_period) {
    PTSCOPE_TRY(CheckField(caps, "--psb-period", "psb_periods", *options.psb_period));
    c.psb_period = *options.psb_period;
  }
  if (!c.mtc) c.mtc_period = 0;
  return c;
}

uint64_t EncodePtConfig(const PtConfig& c) {
  using namespace ptbits;
  uint64_t v = 0;
  auto set = [&](bool on, int bit) { v |= static_cast<uint64_t>(on) << bit; };
  set(c.pt, kPt);
  set(c.cyc, kCyc);
  set(c.mtc, kMtc);
  set(c.tsc, kTsc);
  set(c.noretcomp, kNoRetComp);
  set(c.branch, kBranch);
  v |= static_cast<uint64_t>(c.mtc_period & 0xf) << kMtcPeriod;
  v |= static_cast<uint64_t>(c.cyc_thresh & 0xf) << kCycThresh;
  v |= static_cast<uint64_t>(c.psb_period & 0xf) << kPsbPeriod;
  return v;
}

perf_event_attr BuildPtAttr(const PtConfig& config, const PtAttrRequest& request) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = request.pmu_type;
  attr.config = EncodePtConfig(config);
  attr.sample_type = kSidebandSampleType;  // its AUX/ITRACE_START records join the sideband
  attr.sample_id_all = 1;
  attr.disabled = 1;
  attr.enable_on_exec = request.enable_on_exec ? 1 : 0;
  attr.exclude_kernel = config.kernel ? 0 : 1;
  attr.exclude_user = config.user ? 0 : 1;
  attr.exclude_hv = 1;
  // Full mode: wake the reader when a quarter of the AUX buffer is filled so it never stalls
  // (perf's intel_pt_recording_options(), which clamps to the u32 field as here).
  if (!request.snapshot && request.aux_bytes >= 4) {
    attr.aux_watermark = static_cast<uint32_t>(std::min<uint64_t>(request.aux_bytes / 4, UINT32_MAX));
  }
  return attr;
}

std::vector<std::pair<std::string, std::string>> PtConfigMetadata(const PtConfig& c,
                                                                  uint64_t encoded) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(encoded));
  auto flag = [](bool b) { return std::string(b ? "1" : "0"); };
  return {
      {"pt.config", hex},
      {"pt.tsc", flag(c.tsc)},
      {"pt.mtc", flag(c.mtc)},
      {"pt.mtc_period", std::to_string(c.mtc_period)},
      {"pt.cyc", flag(c.cyc)},
      {"pt.cyc_thresh", std::to_string(c.cyc_thresh)},
      {"pt.psb_period", std::to_string(1ull << (c.psb_period + 11))},
      {"pt.noretcomp", flag(c.noretcomp)},
      {"pt.branch", flag(c.branch)},
      {"pt.user", flag(c.user)},
      {"pt.kernel", flag(c.kernel)},
  };
}

}  // namespace ptscope::record
