// A per-CPU capture with its sideband in the order perf record writes it, for tests of reading a
// perf.data's sideband again from the file: perf empties each CPU's ring buffer in turn, so the
// records of one CPU follow each other in time, while a round's records of CPU 1 are earlier in
// time than the end of CPU 0's; and AUXTRACE records (with their trace bytes) come between them.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ptscope/format.h"
#include "ptscope/perf_data.h"
#include "sideband_records.h"

namespace ptscope::testing {

// CPU c, round r, switch i < 1000 (at time 10000 r + 10 i + 5 c): thread 100 + (r + i + c) % 3 comes in
// (pid 7; tid 0 is idle), the one before goes out. A COMM and an MMAP2 of pid 7 come first.
inline format::Archive PerCpuRoundsArchive(uint32_t rounds, uint32_t switches_per_round) {
  format::Archive a;
  a.path = "rounds.ptar";
  a.metadata = {{"pt.config", "0x2401"}, {"pt.pmu_type", "9"}, {"time.shift", "10"},
                {"time.mult", "1024"}, {"time.zero", "0"}, {"time.cap_user_time_zero", "1"}};
  a.time = format::ParseTimeConversion(a.metadata, a.path).value();
  format::SidebandAttrChunk attr;
  attr.attr_id = 1;
  attr.sample_type = kSidebandSampleType;
  attr.sample_id_all = true;
  attr.ids = {1};
  a.sideband_attrs.push_back(attr);
  format::SidebandChunk chunk;
  chunk.attr_id = 1;
  auto add = [&](const std::vector<uint8_t>& record) {
    chunk.records.insert(chunk.records.end(), record.begin(), record.end());
  };
  perf::MmapRecord mmap;
  mmap.pid = mmap.tid = 7;
  mmap.addr = 0x400000;
  mmap.len = 0x1000;
  mmap.prot = 5;
  mmap.is_mmap2 = true;
  mmap.filename = "/opt/rounds";
  add(SidebandRecord(perf::kRecordComm, perf::kMiscCommExec, perf::CommRecord{7, 7, "rounds", true},
                     7, 7, 1));
  add(SidebandRecord(perf::kRecordMmap2, perf::kMiscUser, mmap, 7, 7, 2));
  uint32_t previous[2] = {0, 0};
  for (uint32_t r = 0; r < rounds; ++r) {
    for (uint32_t cpu = 0; cpu < 2; ++cpu) {
      for (uint32_t i = 0; i < switches_per_round; ++i) {
        const uint64_t time = 10000 * uint64_t{r} + 10 * i + 5 * cpu;
        const uint32_t next = 100 + (r + i + cpu) % 3, prev = previous[cpu];
        const uint32_t prev_pid = prev == 0 ? 0 : 7;
        add(SidebandRecord(perf::kRecordSwitchCpuWide, perf::kMiscSwitchOut,
                           perf::SwitchRecord{true, false, true, 7, next}, prev_pid, prev, time,
                           cpu));
        add(SidebandRecord(perf::kRecordSwitchCpuWide, 0,
                           perf::SwitchRecord{false, false, true, prev_pid, prev}, 7, next, time,
                           cpu));
        previous[cpu] = next;
      }
    }
  }
  a.sideband.push_back(std::move(chunk));
  for (uint32_t cpu = 0; cpu < 2; ++cpu) {
    for (uint32_t piece = 0; piece < 3; ++piece) {
      format::PtDataChunk pt;
      pt.stream_id = cpu;
      pt.cpu = static_cast<int32_t>(cpu);
      pt.stream_offset = 64 * uint64_t{piece};
      pt.reference_tsc = 1 + piece;
      pt.data.assign(64, static_cast<uint8_t>(0x10 * (cpu + 1) + piece));
      a.pt_data.push_back(std::move(pt));
    }
  }
  return a;
}

// `perf_data` (ExportPerfData's layout: every AUXTRACE record after the sideband) with each
// AUXTRACE record and its trace moved to follow every `every`-th other record instead, as perf
// record interleaves them. The data section keeps its size, so the feature sections stay put.
inline std::vector<uint8_t> WithTraceBetweenRecords(const std::vector<uint8_t>& perf_data,
                                                    size_t every) {
  auto le = [&](size_t at, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{perf_data.at(at + i)} << (8 * i);
    return v;
  };
  const size_t begin = le(40, 8), end = begin + le(48, 8);
  std::vector<std::pair<size_t, size_t>> others, traces;  // [offset, length)
  for (size_t at = begin; at < end;) {
    const uint32_t type = static_cast<uint32_t>(le(at, 4));
    size_t length = le(at + 6, 2);
    if (type == 71) length += le(at + 8, 8);  // AUXTRACE: its trace bytes follow
    (type == 71 ? traces : others).emplace_back(at, length);
    at += length;
  }
  std::vector<uint8_t> out(perf_data.begin(), perf_data.begin() + begin);
  auto copy = [&](std::pair<size_t, size_t> record) {
    out.insert(out.end(), perf_data.begin() + record.first,
               perf_data.begin() + record.first + record.second);
  };
  size_t next_trace = 0;
  for (size_t i = 0; i < others.size(); ++i) {
    copy(others[i]);
    if ((i + 1) % every == 0 && next_trace < traces.size()) copy(traces[next_trace++]);
  }
  while (next_trace < traces.size()) copy(traces[next_trace++]);
  out.insert(out.end(), perf_data.begin() + end, perf_data.end());
  return out;
}

}  // namespace ptscope::testing
