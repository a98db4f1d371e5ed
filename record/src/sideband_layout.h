// The one sideband layout every ptscope recorder writes: records carry the sample_id trailer
// TID|TIME|CPU|IDENTIFIER (0x10086), described by the archive's single SidebandAttr chunk,
// attr_id 1. pt-record's kernel events, pt-emulate's and pt-synth's built records and the records
// synthesized from /proc all use it, so one SidebandAttr describes them all.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>

#include "ptscope/perf_records.h"

namespace ptscope::record {

inline constexpr uint64_t kSidebandSampleType =
    PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER;
static_assert(kSidebandSampleType == 0x10086);
inline constexpr uint32_t kSidebandAttrId = 1;
// The sample id of records a recorder builds itself when no kernel event gave it one.
inline constexpr uint64_t kBuiltRecordSampleId = 1;

inline perf::RecordLayout SidebandLayout() { return perf::RecordLayout{kSidebandSampleType, true}; }

}  // namespace ptscope::record
