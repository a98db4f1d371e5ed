// Linux perf_event records (the sideband ptscope keeps verbatim): parsing and building.
// Layouts follow include/uapi/linux/perf_event.h; every field is read bounds-checked and
// little-endian, never by memcpy of a struct. Used by the recorders (to build synthetic records),
// the decoder (to parse sideband) and the perf.data reader/writer.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::perf {

enum RecordType : uint32_t {
  kRecordMmap = 1,
  kRecordLost = 2,
  kRecordComm = 3,
  kRecordExit = 4,
  kRecordThrottle = 5,
  kRecordUnthrottle = 6,
  kRecordFork = 7,
  kRecordRead = 8,
  kRecordSample = 9,
  kRecordMmap2 = 10,
  kRecordAux = 11,
  kRecordItraceStart = 12,
  kRecordLostSamples = 13,
  kRecordSwitch = 14,
  kRecordSwitchCpuWide = 15,
  kRecordNamespaces = 16,
  kRecordKsymbol = 17,
  kRecordBpfEvent = 18,
  kRecordCgroup = 19,
  kRecordTextPoke = 20,
  kRecordAuxOutputHwId = 21,
};

// PERF_SAMPLE_* bits that matter for sample_id trailers.
enum SampleType : uint64_t {
  kSampleIp = 1u << 0,
  kSampleTid = 1u << 1,
  kSampleTime = 1u << 2,
  kSampleAddr = 1u << 3,
  kSampleRead = 1u << 4,
  kSampleCallchain = 1u << 5,
  kSampleId = 1u << 6,
  kSampleCpu = 1u << 7,
  kSamplePeriod = 1u << 8,
  kSampleStreamId = 1u << 9,
  kSampleRaw = 1u << 10,
  kSampleIdentifier = 1u << 16,
};

// header.misc bits.
inline constexpr uint16_t kMiscCpumodeMask = 0x7;
inline constexpr uint16_t kMiscKernel = 1;
inline constexpr uint16_t kMiscUser = 2;
inline constexpr uint16_t kMiscCommExec = 0x2000;      // COMM: the comm changed because of exec
inline constexpr uint16_t kMiscSwitchOut = 0x2000;     // SWITCH: switch-out (else switch-in)
inline constexpr uint16_t kMiscMmapBuildId = 0x4000;   // MMAP2 carries a build id

// AUX record flags.
inline constexpr uint64_t kAuxFlagTruncated = 1;
inline constexpr uint64_t kAuxFlagOverwrite = 2;
inline constexpr uint64_t kAuxFlagPartial = 4;
inline constexpr uint64_t kAuxFlagCollision = 8;

// The trailer appended to non-sample records when attr.sample_id_all is set. Which fields are
// present depends on sample_type; absent ones stay 0.
struct SampleId {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
  uint64_t id = 0;
  uint64_t stream_id = 0;
  uint32_t cpu = 0;
};

struct MmapRecord {  // MMAP and MMAP2
  uint32_t pid = 0, tid = 0;
  uint64_t addr = 0, len = 0, pgoff = 0;
  // MMAP2 inode form (when build_id is empty)
  uint32_t maj = 0, min = 0;
  uint64_t ino = 0, ino_generation = 0;
  std::vector<uint8_t> build_id;  // MMAP2 with kMiscMmapBuildId
  uint32_t prot = 0, flags = 0;   // MMAP2 only (PROT_*, MAP_*)
  std::string filename;
  bool is_mmap2 = true;
};
struct CommRecord {
  uint32_t pid = 0, tid = 0;
  std::string comm;
  bool exec = false;
};
struct TaskRecord {  // FORK and EXIT
  uint32_t pid = 0, ppid = 0, tid = 0, ptid = 0;
  uint64_t time = 0;
  bool is_exit = false;
};
struct LostRecord {
  uint64_t id = 0, lost = 0;
};
struct AuxRecord {
  uint64_t aux_offset = 0, aux_size = 0, flags = 0;
};
struct ItraceStartRecord {
  uint32_t pid = 0, tid = 0;
};
struct SwitchRecord {  // SWITCH and SWITCH_CPU_WIDE
  bool out = false;
  bool preempt = false;  // PERF_RECORD_MISC_SWITCH_OUT_PREEMPT (0x4000) on switch-out
  bool cpu_wide = false;
  uint32_t next_prev_pid = 0, next_prev_tid = 0;  // CPU_WIDE only
};
struct OtherRecord {  // anything else: kept, not interpreted
  std::vector<uint8_t> body;
};

using RecordBody = std::variant<MmapRecord, CommRecord, TaskRecord, LostRecord, AuxRecord,
                                ItraceStartRecord, SwitchRecord, OtherRecord>;

struct Record {
  uint32_t type = 0;
  uint16_t misc = 0;
  RecordBody body;
  std::optional<SampleId> sample_id;  // present when the attr has sample_id_all
};

// How to read the sample_id trailer of records.
struct RecordLayout {
  uint64_t sample_type = kSampleTid | kSampleTime | kSampleIdentifier;
  bool sample_id_all = true;
};

// Parses one record starting at bytes[0]. `size_out` receives header.size. Errors name the record
// type and the field that did not fit.
Result<Record> ParseRecord(std::span<const uint8_t> bytes, const RecordLayout& layout,
                           uint16_t* size_out = nullptr);

// Iterates over concatenated records; stops at the first malformed one and reports it with its
// offset inside `bytes`.
class RecordIterator {
 public:
  RecordIterator(std::span<const uint8_t> bytes, RecordLayout layout)
      : bytes_(bytes), layout_(layout) {}
  // Next record, std::nullopt at the end; an Error for a malformed record (iteration then ends).
  std::optional<Result<Record>> Next();
  uint64_t offset() const { return offset_; }  // offset of the record Next() returned last

 private:
  std::span<const uint8_t> bytes_;
  RecordLayout layout_;
  uint64_t pos_ = 0;
  uint64_t offset_ = 0;
  bool failed_ = false;
};

// Serializes a record (header, body, then the sample_id trailer when layout.sample_id_all) into
// the exact bytes the kernel would produce: strings NUL-terminated and padded to 8 bytes.
std::vector<uint8_t> BuildRecord(const Record& record, const RecordLayout& layout);

}  // namespace ptscope::perf
