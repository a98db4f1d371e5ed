#include "capture_writer.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include "elf_file.h"

namespace ptscope::record {
namespace {

constexpr size_t kSidebandChunkBytes = 64 * 1024;

perf::RecordLayout Layout() {
  perf::RecordLayout layout;
  layout.sample_type = kSidebandSampleType;
  layout.sample_id_all = true;
  return layout;
}

}  // namespace

CaptureWriter::CaptureWriter(std::unique_ptr<format::ArchiveWriter> writer)
    : writer_(std::move(writer)) {}

CaptureWriter::~CaptureWriter() = default;

Result<std::unique_ptr<CaptureWriter>> CaptureWriter::Create(const std::string& path,
                                                             const format::WriterOptions& options) {
  PTSCOPE_ASSIGN_OR_RETURN(auto archive, format::ArchiveWriter::Create(path, options));
  std::unique_ptr<CaptureWriter> writer(new CaptureWriter(std::move(archive)));
  format::SidebandAttrChunk attr;
  attr.attr_id = kSidebandAttrId;
  attr.sample_type = kSidebandSampleType;
  attr.sample_id_all = true;
  attr.ids = {kSidebandSampleId};
  PTSCOPE_TRY(writer->writer_->Write(attr));
  return writer;
}

Status CaptureWriter::WriteMetadata(std::vector<std::pair<std::string, std::string>> entries) {
  format::MetadataChunk chunk;
  chunk.entries = std::move(entries);
  return writer_->Write(chunk);
}

Status CaptureWriter::AddRecord(const perf::Record& record, uint32_t pid, uint32_t tid,
                                uint64_t time, uint32_t cpu) {
  perf::Record copy = record;
  perf::SampleId id;
  id.pid = pid;
  id.tid = tid;
  id.time = time;
  id.id = kSidebandSampleId;
  id.cpu = cpu;
  copy.sample_id = id;
  const std::vector<uint8_t> bytes = perf::BuildRecord(copy, Layout());
  sideband_.insert(sideband_.end(), bytes.begin(), bytes.end());
  ++sideband_records_;
  if (sideband_.size() >= kSidebandChunkBytes) return FlushSideband();
  return Ok();
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

const ModuleInfo& CaptureWriter::Module(const std::string& path) {
  auto it = modules_.find(path);
  if (it != modules_.end()) return it->second;
  ModuleInfo info;
  info.path = path;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    info.size = static_cast<uint64_t>(st.st_size);
    info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }
  if (auto elf = ElfFile::Open(path)) info.build_id = elf->build_id();
  return modules_.emplace(path, std::move(info)).first->second;
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
    const ModuleInfo& module = Module(map.path);
    mmap.build_id = module.build_id;
    if (!module.build_id.empty()) record.misc |= perf::kMiscMmapBuildId;
    if (!module_written_[map.path] && map.exec) {
      module_written_[map.path] = true;
      format::ModuleChunk chunk;
      chunk.path = module.path;
      chunk.build_id = module.build_id;
      chunk.size = module.size;
      chunk.mtime_ns = module.mtime_ns;
      PTSCOPE_TRY(writer_->Write(chunk));
    }
  }
  if (mmap.build_id.empty()) {
    mmap.maj = map.dev_major;
    mmap.min = map.dev_minor;
    mmap.ino = map.inode;
  }
  record.body = std::move(mmap);
  return AddRecord(record, pid, tid, time);
}

Status CaptureWriter::WritePtData(const format::PtDataChunk& chunk) {
  pt_bytes_ += chunk.data.size();
  return writer_->Write(chunk);
}

Status CaptureWriter::WriteChunk(const format::Chunk& chunk) { return writer_->Write(chunk); }

Status CaptureWriter::FlushSideband() {
  if (sideband_.empty()) return Ok();
  format::SidebandChunk chunk;
  chunk.attr_id = kSidebandAttrId;
  chunk.cpu = -1;
  chunk.records = std::move(sideband_);
  sideband_.clear();
  return writer_->Write(chunk);
}

Status CaptureWriter::Close() {
  PTSCOPE_TRY(FlushSideband());
  return writer_->Close();
}

}  // namespace ptscope::record
