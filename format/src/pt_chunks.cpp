// (see ptscope/pt_chunks.h)
#include "ptscope/pt_chunks.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <variant>

#include "ptscope/file_read.h"

namespace ptscope::format {

PtChunkReader::PtChunkReader(std::string path) : path_(std::move(path)) {}

PtChunkReader::~PtChunkReader() {
  if (fd_ >= 0) ::close(fd_);
}

PtChunkReader::PtChunkReader(PtChunkReader&& other) noexcept
    : path_(std::move(other.path_)),
      reader_(std::move(other.reader_)),
      fd_(std::exchange(other.fd_, -1)),
      window_(std::move(other.window_)),
      kept_offset_(std::exchange(other.kept_offset_, UINT64_MAX)),
      kept_(std::move(other.kept_)) {}

Status PtChunkReader::ReadRaw(const Archive::PtDataRef& ref) {
  if (fd_ < 0) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      const int err = errno;  // before the message's allocations
      return Unexpected(ErrcFromErrno(err),
                        path_ + ": cannot open again to read its trace: " + std::strerror(err));
    }
  }
  kept_.resize(static_cast<size_t>(ref.size));
  const FileRead read = window_.Read(fd_, ref.chunk_offset, kept_.size(), kept_.data());
  if (read.bytes == kept_.size()) return Ok();
  return Unexpected(Errc::kIo,
                    path_ + ": offset " + std::to_string(ref.chunk_offset + read.bytes) + ": " +
                        (read.error != 0 ? std::string("read failed: ") + std::strerror(read.error)
                                         : "the file ends there (it changed since it was first "
                                           "read?)"));
}

Result<std::span<const uint8_t>> PtChunkReader::Read(const Archive::PtDataRef& ref) {
  if (kept_offset_ == ref.chunk_offset) return std::span<const uint8_t>(kept_);
  kept_offset_ = UINT64_MAX;  // until the read succeeds
  if (ref.raw) {
    PTSCOPE_TRY(ReadRaw(ref));
  } else {
    if (reader_ == nullptr) {
      PTSCOPE_ASSIGN_OR_RETURN(reader_, ArchiveReader::Open(path_));
    }
    PTSCOPE_ASSIGN_OR_RETURN(Chunk chunk, reader_->ReadChunkAt(ref.chunk_offset));
    auto* pt = std::get_if<PtDataChunk>(&chunk);
    if (pt == nullptr || pt->data.size() != ref.size) {
      return Unexpected(Errc::kCorrupt, path_ + ": the PT data chunk at offset " +
                                            std::to_string(ref.chunk_offset) +
                                            " is not the one read first (the file changed since "
                                            "it was first read?)");
    }
    kept_ = std::move(pt->data);
  }
  kept_offset_ = ref.chunk_offset;
  return std::span<const uint8_t>(kept_);
}

void PtChunkReader::Forget() {
  kept_offset_ = UINT64_MAX;
  std::vector<uint8_t>().swap(kept_);
}

}  // namespace ptscope::format
