// ArchiveWriter: every chunk is assembled in memory (header + payload + padding) and handed to
// the kernel in one write(2), so a writer killed at any instant leaves whole chunks plus at most
// one torn tail that readers detect by its size or checksums.
#include <fcntl.h>
#include <lz4.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "archive_layout.h"
#include "byte_io.h"
#include "chunk_codec.h"
#include "crc32c.h"
#include "ptscope/format.h"

namespace ptscope::format {
namespace {

// Below this, lz4 framing overhead rarely pays off.
constexpr size_t kMinCompressSize = 64;

Error ErrnoError(const std::string& path, const char* what, int err) {
  Errc code = ErrcFromErrno(err);
  return MakeError(code, path + ": " + what + ": " + std::strerror(err));
}

// Writes all of `bytes` (one write(2) in practice; loops only on short writes / EINTR).
Status WriteAll(int fd, const std::string& path, const uint8_t* bytes, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, bytes, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(path, "write failed", errno);
    }
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return Ok();
}

std::vector<uint8_t> EncodeFileHeader(const FileHeader& h) {
  std::vector<uint8_t> out;
  ByteWriter w(out);
  w.Bytes(std::span<const uint8_t>(layout::kFileMagic));
  w.U16(h.version_major);
  w.U16(h.version_minor);
  w.U16(h.min_reader_major);
  w.U16(static_cast<uint16_t>(layout::kFileHeaderSize));
  w.U64(h.features);
  w.U64(h.created_unix_ns);
  w.U32(0);  // CRC, filled below
  w.U32(0);  // reserved
  StoreLe(out.data() + layout::kHeaderCrc, Crc32c(out), 4);
  return out;
}

uint64_t NowUnixNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Fills the chunk header at the front of `buf` (which holds header space + stored payload) and
// pads the payload to 8 bytes.
void FinishChunk(std::vector<uint8_t>& buf, ChunkType type, uint16_t flags, uint64_t raw_size) {
  uint64_t stored = buf.size() - layout::kChunkHeaderSize;
  uint8_t* h = buf.data();
  StoreLe(h + layout::kChunkSyncOff, layout::kChunkSync, 4);
  StoreLe(h + layout::kChunkTypeOff, static_cast<uint16_t>(type), 2);
  StoreLe(h + layout::kChunkFlagsOff, flags, 2);
  StoreLe(h + layout::kChunkStoredOff, stored, 8);
  StoreLe(h + layout::kChunkRawOff, raw_size, 8);
  uint32_t payload_crc = Crc32cExtend(0, h + layout::kChunkHeaderSize, stored);
  StoreLe(h + layout::kChunkPayloadCrcOff, payload_crc, 4);
  StoreLe(h + layout::kChunkHeaderCrcOff, Crc32cExtend(0, h, layout::kChunkHeaderCrcOff), 4);
  buf.resize(layout::PaddedTo8(buf.size()), 0);
}

}  // namespace

ArchiveWriter::ArchiveWriter(std::string path, int fd, WriterOptions options)
    : path_(std::move(path)), fd_(fd), options_(options) {}

ArchiveWriter::~ArchiveWriter() {
  if (fd_ >= 0) ::close(fd_);  // no End chunk: the archive reads back as incomplete
}

Result<std::unique_ptr<ArchiveWriter>> ArchiveWriter::Create(const std::string& path,
                                                             const WriterOptions& options) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError(path, "cannot create archive", errno);
  // An existing file keeps its old mode through O_TRUNC; captures may hold secrets, so force 0600.
  if (::fchmod(fd, 0600) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(path, "cannot set mode 0600", err);
  }
  FileHeader header;
  header.features = options.features;
  header.created_unix_ns = options.created_unix_ns ? options.created_unix_ns : NowUnixNs();
  std::vector<uint8_t> bytes = EncodeFileHeader(header);
  Status written = WriteAll(fd, path, bytes.data(), bytes.size());
  if (!written) {
    ::close(fd);
    return std::move(written).error();
  }
  std::unique_ptr<ArchiveWriter> writer(new ArchiveWriter(path, fd, options));
  writer->bytes_written_ = bytes.size();
  return writer;
}

Status ArchiveWriter::Write(const Chunk& chunk) {
  if (fd_ < 0) return MakeError(Errc::kInvalidArgument, path_ + ": archive already closed");
  std::vector<uint8_t> buf(layout::kChunkHeaderSize);
  EncodePayload(chunk, buf);
  uint64_t raw_size = buf.size() - layout::kChunkHeaderSize;
  if (raw_size > layout::kMaxChunkRawSize) {
    return MakeError(Errc::kInvalidArgument,
                     path_ + ": " + ChunkTypeName(TypeOf(chunk)) + " chunk of " +
                         std::to_string(raw_size) + " bytes exceeds the 1 GiB chunk limit; " +
                         "split the data into several chunks");
  }
  uint16_t flags = 0;
  if (options_.compress && raw_size >= kMinCompressSize) {
    int bound = LZ4_compressBound(static_cast<int>(raw_size));
    std::vector<uint8_t> packed(layout::kChunkHeaderSize + static_cast<size_t>(bound));
    int n = LZ4_compress_default(
        reinterpret_cast<const char*>(buf.data() + layout::kChunkHeaderSize),
        reinterpret_cast<char*>(packed.data() + layout::kChunkHeaderSize),
        static_cast<int>(raw_size), bound);
    if (n > 0 && static_cast<uint64_t>(n) < raw_size) {
      packed.resize(layout::kChunkHeaderSize + static_cast<size_t>(n));
      buf.swap(packed);
      flags |= layout::kChunkFlagLz4;
    }
  }
  FinishChunk(buf, TypeOf(chunk), flags, raw_size);
  if (Status written = WriteAll(fd_, path_, buf.data(), buf.size()); !written) {
    // Cut a partly written chunk off again (e.g. after ENOSPC), so that chunks written later by
    // a caller that retries do not land behind a torn one where readers would never reach them.
    if (::ftruncate(fd_, static_cast<off_t>(bytes_written_)) == 0) {
      ::lseek(fd_, static_cast<off_t>(bytes_written_), SEEK_SET);
    }
    return written;
  }
  if (options_.sync_each_chunk && ::fdatasync(fd_) != 0) {
    return ErrnoError(path_, "fdatasync failed", errno);
  }
  ++chunks_written_;
  bytes_written_ += buf.size();
  return Ok();
}

Status ArchiveWriter::Flush() {
  if (fd_ < 0) return MakeError(Errc::kInvalidArgument, path_ + ": archive already closed");
  if (::fdatasync(fd_) != 0) return ErrnoError(path_, "fdatasync failed", errno);
  return Ok();
}

Status ArchiveWriter::Close() {
  if (fd_ < 0) return MakeError(Errc::kInvalidArgument, path_ + ": archive already closed");
  PTSCOPE_TRY(Write(EndChunk{chunks_written_}));
  int fd = fd_;
  fd_ = -1;
  if (options_.sync_each_chunk && ::fdatasync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(path_, "fdatasync failed", err);
  }
  if (::close(fd) != 0) return ErrnoError(path_, "close failed", errno);
  return Ok();
}

}  // namespace ptscope::format
