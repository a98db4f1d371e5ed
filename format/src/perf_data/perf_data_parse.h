// The raw view of a perf.data file: what perf_data_parse.cpp validates and extracts, before
// perf_data_import.cpp turns it into an Archive. Spans point into the caller's byte buffer.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "perf_data_layout.h"
#include "ptscope/result.h"

namespace ptscope::format::perf_data {

struct ParsedAttr {
  uint64_t file_offset = 0;
  uint32_t type = 0;
  uint64_t config = 0, sample_type = 0, read_format = 0, flags = 0;
  std::vector<uint64_t> ids;
  std::vector<uint8_t> raw;  // attr.size bytes as stored
};

struct ParsedAuxtrace {
  uint64_t file_offset = 0;
  uint64_t offset = 0, reference = 0;
  uint32_t idx = 0, tid = 0, cpu = 0;
  std::span<const uint8_t> data;  // `size` bytes (perf pads to 8 with zeros)
};

struct ParsedRecord {  // a kernel record (type < 64), verbatim
  uint64_t file_offset = 0;
  std::span<const uint8_t> bytes;
};

struct ParsedPerfData {
  std::vector<ParsedAttr> attrs;
  TrailerLayout trailer;            // common to every attr (checked)
  uint64_t trailer_sample_type = 0;
  bool sample_id_all = false;

  bool have_info = false;
  uint64_t info_offset = 0;
  std::vector<uint64_t> priv;       // as many fixed entries as the record holds (<= kPrivCount)
  std::string filter;

  bool have_time_conv = false;
  uint64_t tc_shift = 0, tc_mult = 0, tc_zero = 0;
  bool tc_cap_user_time_zero = false;

  std::vector<ParsedAuxtrace> auxtrace;
  std::vector<ParsedRecord> sideband;
  uint64_t samples_skipped = 0;

  std::map<std::string, std::vector<uint8_t>> build_ids;  // filename -> build id (BUILD_ID)
  std::string hostname, os_release, perf_version, cpuid, cmdline;
};

// Validates the header, attrs, data records and the features we use. Errors read
// "<name>: offset N: <what>; <what to do>".
Result<ParsedPerfData> ParsePerfData(std::span<const uint8_t> bytes, const std::string& name);

}  // namespace ptscope::format::perf_data
