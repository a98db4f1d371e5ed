// The raw view of a perf.data file: what perf_data_parse.cpp validates and extracts, before
// perf_data_import.cpp turns it into an Archive.
//
// The parser reads through a ByteSource, never the whole file: an AUXTRACE record's trace bytes
// (most of a capture) are only located (ParsedAuxtrace::data_offset), so that an importer that
// leaves them on disk holds memory for the sideband only, whatever the length of the capture.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "perf_data_layout.h"
#include "ptscope/format.h"
#include "ptscope/result.h"

namespace ptscope::format::perf_data {

// Random access to the bytes of a perf.data: a file read on demand, or a buffer.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  virtual const std::string& name() const = 0;  // the file's path, for messages
  // Copies [offset, offset + n) into `out`. An error names the source and the offset (a file
  // that became shorter since it was opened, an I/O error).
  virtual Status Read(uint64_t offset, size_t n, uint8_t* out) const = 0;
};

// The file at `path`, opened now (errors name it); reads use pread.
Result<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path);
// `bytes`, held by the source.
std::unique_ptr<ByteSource> MakeBufferSource(std::vector<uint8_t> bytes, std::string name);

// Stable storage for the kernel records the parser keeps: blocks that never move, so that the
// spans into them stay valid for the parse result's lifetime.
class RecordArena {
 public:
  std::span<const uint8_t> Add(std::span<const uint8_t> bytes);

 private:
  static constexpr size_t kBlockBytes = 1u << 20;  // > the largest record (64 KiB)
  std::vector<std::unique_ptr<uint8_t[]>> blocks_;
  size_t used_ = kBlockBytes;  // in the last block
};

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
  // The trace bytes: `size` of them (perf pads to 8 with zeros) at file offset `data_offset`,
  // inside the data section (checked); not read by the parser.
  uint64_t data_offset = 0, size = 0;
  bool cut = false;  // the file ends inside the trace bytes: `size` is what is there
};

struct ParsedRecord {  // a kernel record (type < 64), verbatim
  uint64_t file_offset = 0;
  std::span<const uint8_t> bytes;  // in ParsedPerfData::records
};

// Where the kernel records lie in the data section, in file order, about 1 MiB of them per range
// (Archive::SidebandRange: the import's chunks when it does not keep the sideband's bytes).
inline constexpr size_t kSidebandRangeBytes = 1u << 20;

struct ParseOptions {
  // false: context-switch records (SWITCH, SWITCH_CPU_WIDE: two per context switch of a per-CPU
  // capture, as many as it is long) are located (sideband_ranges) but not kept in `sideband`.
  bool keep_switch_records = true;
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
  uint64_t tc_offset = 0;  // of the TIME_CONV record
  uint64_t tc_shift = 0, tc_mult = 0, tc_zero = 0;
  bool tc_cap_user_time_zero = false;

  std::vector<ParsedAuxtrace> auxtrace;
  std::vector<ParsedRecord> sideband;  // every kernel record but SAMPLE (see ParseOptions)
  std::vector<Archive::SidebandRange> sideband_ranges;  // every kernel record but SAMPLE
  std::unique_ptr<RecordArena> records = std::make_unique<RecordArena>();  // sideband's bytes
  uint64_t samples_skipped = 0;

  std::map<std::string, std::vector<uint8_t>> build_ids;  // filename -> build id (BUILD_ID)
  // Where the file was cut or damaged (perf.data salvage: what was complete before is above),
  // as archive damage: each range [offset, end) not read, with the reason naming the offset.
  std::vector<Damage> damage;
  std::string hostname, os_release, perf_version, cpuid, cmdline;
};

// Validates the header, attrs, data records and the features we use. Errors read
// "<name>: offset N: <what>; <what to do>".
Result<ParsedPerfData> ParsePerfData(const ByteSource& source, const std::string& name,
                                     const ParseOptions& options = {});

// The kernel records of `range` (one of ParsedPerfData::sideband_ranges of the same file), read
// again and concatenated: the other records between them (AUXTRACE with its trace bytes, perf's
// own records, samples) are skipped. An error names the source and the offset when the bytes
// there are no longer the records the range was made from (the file changed since it was parsed).
Result<std::vector<uint8_t>> ReadSidebandRange(const ByteSource& source,
                                               const Archive::SidebandRange& range);

}  // namespace ptscope::format::perf_data
