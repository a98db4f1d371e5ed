// The bytes of one perf sideband record as this project's writers lay them out (sample_id_all,
// TID | TIME | CPU | IDENTIFIER, id 1), for tests that build sideband chunks by hand.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ptscope/perf_records.h"

namespace ptscope::testing {

inline constexpr uint64_t kSidebandSampleType = 0x10086;  // TID|TIME|CPU|IDENTIFIER

inline std::vector<uint8_t> SidebandRecord(uint32_t type, uint16_t misc, perf::RecordBody body,
                                           uint32_t pid, uint32_t tid, uint64_t time,
                                           uint32_t cpu = 0) {
  perf::Record r;
  r.type = type;
  r.misc = misc;
  r.body = std::move(body);
  perf::SampleId id;
  id.pid = pid;
  id.tid = tid;
  id.time = time;
  id.cpu = cpu;
  id.id = 1;  // the exporter's id, so a perf.data round trip is byte-exact
  r.sample_id = id;
  return perf::BuildRecord(r, {kSidebandSampleType, true});
}

}  // namespace ptscope::testing
