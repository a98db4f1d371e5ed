#include "capture_writer.h"

#include <sys/mman.h>

namespace ptscope::record {
namespace {

// Sideband waits in memory until this much is buffered (or PT is written, or a flush is asked):
// one chunk per 64 KiB instead of one per record.
constexpr size_t kSidebandChunkBytes = 64 * 1024;

}  // namespace

CaptureWriter::CaptureWriter(std::unique_ptr<format::ArchiveWriter> writer,
                             const CaptureOptions& options)
    : writer_(std::move(writer)),
      built_id_(options.sideband_ids.empty() ? kBuiltRecordSampleId : options.sideband_ids[0]),
      embed_binaries_(options.embed_binaries) {}

CaptureWriter::~CaptureWriter() = default;

Result<std::unique_ptr<CaptureWriter>> CaptureWriter::Create(const std::string& path,
                                                             const CaptureOptions& options) {
  PTSCOPE_ASSIGN_OR_RETURN(auto archive, format::ArchiveWriter::Create(path, options.archive));
  std::unique_ptr<CaptureWriter> writer(new CaptureWriter(std::move(archive), options));
  format::SidebandAttrChunk attr;
  attr.attr_id = kSidebandAttrId;
  attr.sample_type = kSidebandSampleType;
  attr.sample_id_all = true;
  attr.ids = options.sideband_ids;
  attr.raw_attr = options.raw_attr;
  if (Status written = writer->writer_->Write(attr); !written) {
    writer->Discard();
    return std::move(written).error();
  }
  return writer;
}

Status CaptureWriter::WriteMetadata(std::vector<std::pair<std::string, std::string>> entries) {
  format::MetadataChunk chunk;
  chunk.entries = std::move(entries);
  return writer_->Write(chunk);
}

Status CaptureWriter::Buffer(int32_t cpu, std::span<const uint8_t> records) {
  modules_.Scan(records);
  PTSCOPE_TRY(WriteNewModules());
  std::vector<uint8_t>& pending = pending_[cpu];
  pending.insert(pending.end(), records.begin(), records.end());
  pending_bytes_ += records.size();
  sideband_bytes_ += records.size();
  if (pending_bytes_ >= kSidebandChunkBytes) return FlushSideband();
  return Ok();
}

Status CaptureWriter::WriteNewModules() {
  for (auto& [path, build_id] : modules_.TakeNewFiles()) {
    if (!modules_written_.insert(path).second) continue;
    format::ModuleChunk module = DescribeModule(path, build_id, &build_ids_);
    if (embed_binaries_) {
      Result<format::BlobChunk> blob = EmbedModule(module);
      if (blob) {
        PTSCOPE_TRY(writer_->Write(*blob));
        module.embedded = true;
      } else {
        warnings_.push_back(blob.error().message);
      }
    }
    PTSCOPE_TRY(writer_->Write(module));
  }
  return Ok();
}

Status CaptureWriter::AddRecord(const perf::Record& record, uint32_t pid, uint32_t tid,
                                uint64_t time, uint32_t cpu) {
  perf::Record copy = record;
  perf::SampleId id;
  id.pid = pid;
  id.tid = tid;
  id.time = time;
  id.id = built_id_;
  id.cpu = cpu;
  copy.sample_id = id;
  const std::vector<uint8_t> bytes = perf::BuildRecord(copy, SidebandLayout());
  ++sideband_records_;
  return Buffer(-1, bytes);
}

Status CaptureWriter::AddRawRecords(std::span<const uint8_t> records, int32_t cpu) {
  if (records.empty()) return Ok();
  return Buffer(cpu, records);
}

Status CaptureWriter::AddComm(uint32_t pid, uint32_t tid, const std::string& comm, bool exec,
                              uint64_t time) {
  perf::Record record;
  record.type = perf::kRecordComm;
  record.misc = perf::kMiscUser | (exec ? perf::kMiscCommExec : 0);
  record.body = perf::CommRecord{pid, tid, comm, exec};
  return AddRecord(record, pid, tid, time);
}

Status CaptureWriter::AddFork(uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid,
                              uint64_t time) {
  perf::Record record;
  record.type = perf::kRecordFork;
  record.body = perf::TaskRecord{pid, ppid, tid, ptid, time, false};
  return AddRecord(record, pid, tid, time);
}

Status CaptureWriter::AddExit(uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid,
                              uint64_t time) {
  perf::Record record;
  record.type = perf::kRecordExit;
  record.body = perf::TaskRecord{pid, ppid, tid, ptid, time, true};
  return AddRecord(record, pid, tid, time);
}

Status CaptureWriter::AddMapping(uint32_t pid, uint32_t tid, const MapEntry& map, uint64_t time) {
  perf::MmapRecord mmap;
  mmap.pid = pid;
  mmap.tid = tid;
  mmap.addr = map.start;
  mmap.len = map.size();
  mmap.pgoff = map.offset;
  mmap.prot = map.prot();
  mmap.flags = map.shared ? MAP_SHARED : MAP_PRIVATE;
  mmap.filename = map.path.empty() ? "//anon" : map.path;
  mmap.is_mmap2 = true;
  perf::Record record;
  record.type = perf::kRecordMmap2;
  record.misc = perf::kMiscUser;
  if (map.is_file()) {
    mmap.build_id = build_ids_.Get(map.path, static_cast<int>(pid), &map);
    if (!mmap.build_id.empty()) record.misc |= perf::kMiscMmapBuildId;
  }
  if (mmap.build_id.empty()) {
    mmap.maj = map.dev_major;
    mmap.min = map.dev_minor;
    mmap.ino = map.inode;
  }
  record.body = std::move(mmap);
  return AddRecord(record, pid, tid, time);
}

Status CaptureWriter::WritePt(const format::PtDataChunk& chunk) {
  PTSCOPE_TRY(FlushSideband());
  pt_bytes_ += chunk.data.size();
  return writer_->Write(chunk);
}

Status CaptureWriter::WriteChunk(const format::Chunk& chunk) { return writer_->Write(chunk); }

Status CaptureWriter::FlushSideband() {
  for (auto& [cpu, records] : pending_) {
    if (records.empty()) continue;
    format::SidebandChunk chunk;
    chunk.attr_id = kSidebandAttrId;
    chunk.cpu = cpu;
    chunk.records = std::move(records);
    records.clear();
    PTSCOPE_TRY(writer_->Write(chunk));
  }
  pending_bytes_ = 0;
  return Ok();
}

Status CaptureWriter::Close() {
  PTSCOPE_TRY(FlushSideband());
  return writer_->Close();
}

void CaptureWriter::Discard() { writer_->Discard(); }

}  // namespace ptscope::record
