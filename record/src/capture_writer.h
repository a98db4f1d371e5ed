// The one writer of capture archives: pt-record, pt-emulate and pt-synth all write through it.
// It owns the order of the chunks, which is what lets a cut archive decode up to the cut
// (FORMAT.md "Chunk order"):
//  - metadata (host, PT configuration, time conversion) and the SidebandAttr come first;
//  - sideband records are buffered (per CPU for kernel rings, one buffer for built records) and
//    written before any PT chunk (WritePt flushes them first), so the mappings, comm, fork and
//    switch records that interpret a PT piece always precede it;
//  - a Module chunk (and with embedding, the binary's Blob) is written the first time a record
//    maps the file, not at the end;
//  - the End chunk only on Close().
// Every chunk is handed to the kernel as it is written: a killed recorder loses only what was
// still buffered.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "module_collector.h"
#include "proc_maps.h"
#include "ptscope/format.h"
#include "ptscope/perf_records.h"
#include "ptscope/result.h"
#include "sideband_layout.h"

namespace ptscope::record {

struct CaptureOptions {
  format::WriterOptions archive;
  // perf sample ids of the SidebandAttr: the kernel events' ids (pt-record), or just
  // kBuiltRecordSampleId. Records built here carry the first one.
  std::vector<uint64_t> sideband_ids = {kBuiltRecordSampleId};
  std::vector<uint8_t> raw_attr;  // the sideband perf_event_attr as passed to the kernel, if any
  bool embed_binaries = false;    // a Blob of each mapped ELF, written with its Module chunk
};

class CaptureWriter {
 public:
  static Result<std::unique_ptr<CaptureWriter>> Create(const std::string& path,
                                                       const CaptureOptions& options);
  ~CaptureWriter();

  Status WriteMetadata(std::vector<std::pair<std::string, std::string>> entries);

  // Built sideband, with sample_id {pid, tid, time, cpu, first sideband id}. Buffered in call
  // order, which must be time order.
  Status AddRecord(const perf::Record& record, uint32_t pid, uint32_t tid, uint64_t time,
                   uint32_t cpu = 0);
  Status AddComm(uint32_t pid, uint32_t tid, const std::string& comm, bool exec, uint64_t time);
  Status AddFork(uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid, uint64_t time);
  Status AddExit(uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid, uint64_t time);
  // MMAP2 for one /proc/PID/maps line (build id form when the file has one).
  Status AddMapping(uint32_t pid, uint32_t tid, const MapEntry& map, uint64_t time);
  // Records verbatim (a kernel ring's, or synthesized from /proc) in SidebandLayout, for the
  // Sideband chunks of `cpu` (-1: not per CPU).
  Status AddRawRecords(std::span<const uint8_t> records, int32_t cpu);

  // A PT piece. Every buffered sideband record is written first.
  Status WritePt(const format::PtDataChunk& chunk);
  Status WriteChunk(const format::Chunk& chunk);  // blobs, markers, time sync, anything else
  Status FlushSideband();
  // Flushes sideband and appends the End chunk: the archive is complete only after this.
  Status Close();
  // Removes the archive: for a capture whose setup failed before it recorded anything.
  void Discard();

  const ModuleCollector& modules() const { return modules_; }
  uint64_t sideband_records() const { return sideband_records_; }
  uint64_t sideband_bytes() const { return sideband_bytes_; }
  uint64_t pt_bytes() const { return pt_bytes_; }
  uint64_t bytes_written() const { return writer_->bytes_written(); }
  const std::string& path() const { return writer_->path(); }
  // Problems that did not stop the capture (a binary that could not be embedded).
  std::vector<std::string> TakeWarnings() { return std::exchange(warnings_, {}); }

 private:
  CaptureWriter(std::unique_ptr<format::ArchiveWriter> writer, const CaptureOptions& options);
  Status Buffer(int32_t cpu, std::span<const uint8_t> records);
  Status WriteNewModules();

  std::unique_ptr<format::ArchiveWriter> writer_;
  uint64_t built_id_;
  bool embed_binaries_;
  std::map<int32_t, std::vector<uint8_t>> pending_;  // by cpu
  size_t pending_bytes_ = 0;
  ModuleCollector modules_;
  BuildIdCache build_ids_;
  std::set<std::string> modules_written_;
  uint64_t sideband_records_ = 0;
  uint64_t sideband_bytes_ = 0;
  uint64_t pt_bytes_ = 0;
  std::vector<std::string> warnings_;
};

}  // namespace ptscope::record
