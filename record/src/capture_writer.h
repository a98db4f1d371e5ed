// Writes a capture archive the way both recorders need it: metadata, the sideband attr, raw perf
// sideband records (buffered into Sideband chunks, in time order), one ModuleChunk per mapped ELF
// (with its build id), PT pieces, blobs, markers and time sync pairs; End only on Close().
// Shared by pt-emulate and pt-record.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "proc_maps.h"
#include "ptscope/format.h"
#include "ptscope/perf_records.h"
#include "ptscope/result.h"

namespace ptscope::record {

// TID|TIME|CPU|IDENTIFIER: what every sideband record's sample_id trailer holds.
inline constexpr uint64_t kSidebandSampleType = 0x10086;
inline constexpr uint32_t kSidebandAttrId = 1;
inline constexpr uint64_t kSidebandSampleId = 1;

// What the writer knows about a mapped file: build id and ModuleChunk fields.
struct ModuleInfo {
  std::string path;
  std::vector<uint8_t> build_id;  // empty when unreadable or not an ELF with a GNU build id
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

class CaptureWriter {
 public:
  static Result<std::unique_ptr<CaptureWriter>> Create(const std::string& path,
                                                       const format::WriterOptions& options);
  ~CaptureWriter();

  Status WriteMetadata(std::vector<std::pair<std::string, std::string>> entries);

  // Sideband, all with sample_id {pid, tid, time, cpu, id}. Times must not decrease.
  Status AddRecord(const perf::Record& record, uint32_t pid, uint32_t tid, uint64_t time,
                   uint32_t cpu = 0);
  Status AddComm(uint32_t pid, uint32_t tid, const std::string& comm, bool exec, uint64_t time);
  Status AddFork(uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid, uint64_t time);
  Status AddExit(uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid, uint64_t time);
  // MMAP2 for one /proc/PID/maps line (build id form when the file has one) plus, the first time
  // a file is seen, its ModuleChunk.
  Status AddMapping(uint32_t pid, uint32_t tid, const MapEntry& map, uint64_t time);

  Status WritePtData(const format::PtDataChunk& chunk);
  Status WriteChunk(const format::Chunk& chunk);  // blobs, markers, time sync, anything else

  // Build id, size and mtime of a file (cached by path).
  const ModuleInfo& Module(const std::string& path);

  Status FlushSideband();
  // Flushes sideband and appends the End chunk: the archive is complete only after this.
  Status Close();

  uint64_t sideband_records() const { return sideband_records_; }
  uint64_t pt_bytes() const { return pt_bytes_; }
  const std::string& path() const { return writer_->path(); }

 private:
  explicit CaptureWriter(std::unique_ptr<format::ArchiveWriter> writer);

  std::unique_ptr<format::ArchiveWriter> writer_;
  std::vector<uint8_t> sideband_;
  uint64_t sideband_records_ = 0;
  uint64_t pt_bytes_ = 0;
  std::map<std::string, ModuleInfo> modules_;
  std::map<std::string, bool> module_written_;
};

}  // namespace ptscope::record
