// --filter: Intel PT address filters in pt-record's symbolic form, turned into the kernel's
// PERF_EVENT_IOC_SET_FILTER syntax ("filter 0xOFFSET/SIZE@/path"), where the number is a file
// offset inside the object (the kernel places it in every mapping of that file). What the kernel
// would refuse is refused here, when the options are parsed, with the reason: Intel PT takes only
// ranges (pt_event_addr_filters_validate(): no "start", no single addresses), at most
// caps/num_address_ranges of them, and file-based filters only on per-task events
// (perf_event_parse_addr_filter(): not with -a).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ptscope/result.h"

namespace ptscope::record {

struct FilterLimits {
  bool cpu_wide = false;                 // -a
  std::optional<uint32_t> max_ranges;    // caps/num_address_ranges, when known
};

// Accepts comma-separated items "ACTION WHAT @ FILE" with ACTION filter|stop and WHAT a symbol
// name or 0xOFFSET/SIZE. A symbol's size is its st_size.
Result<std::string> ResolvePtFilter(const std::string& text, const FilterLimits& limits = {});

}  // namespace ptscope::record
