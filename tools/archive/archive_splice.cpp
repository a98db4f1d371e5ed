#include "archive_splice.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <variant>

namespace ptscope::tools {
namespace {

namespace fmt = ptscope::format;

constexpr uint64_t kChunkHeaderBytes = 32;     // FORMAT.md "Chunk"
constexpr uint64_t kHeaderSizeOffset = 14;     // FORMAT.md "File header": u16 header_size

uint64_t PaddedTo8(uint64_t n) { return (n + 7) / 8 * 8; }

Error Errno(const std::string& path, const std::string& what, int err) {
  return MakeError(err == ENOENT ? Errc::kNotFound : Errc::kIo,
                   path + ": " + what + ": " + std::strerror(err));
}

Result<std::vector<uint8_t>> ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return MakeError(Errc::kInvalidArgument, path + ": not a regular file");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      return Errno(path, "read failed", err);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return bytes;
}

Status WriteAllTo(int fd, const std::string& path, const std::vector<uint8_t>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(path, "write failed", errno);
    done += static_cast<size_t>(n);
  }
  return Ok();
}

std::string DirOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void Append(std::vector<uint8_t>& out, const std::vector<uint8_t>& from, uint64_t begin,
            uint64_t end) {
  out.insert(out.end(), from.begin() + static_cast<std::ptrdiff_t>(begin),
             from.begin() + static_cast<std::ptrdiff_t>(end));
}

// Encodes `chunks` (and an End chunk counting `end_count` when `with_end`) with ArchiveWriter
// into a scratch file; returns its bytes and the [begin, end) range of each chunk.
struct Encoded {
  std::vector<uint8_t> bytes;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // chunks..., then End when written
};

Result<Encoded> EncodeChunks(const std::vector<const fmt::Chunk*>& chunks, bool with_end,
                             uint64_t end_count, const fmt::FileHeader& header,
                             const std::string& scratch_dir) {
  std::string scratch = scratch_dir + "/.pt-archive-scratch-XXXXXX";
  int fd = ::mkstemp(scratch.data());
  if (fd < 0) return Errno(scratch_dir, "cannot create a scratch file", errno);
  ::close(fd);
  Encoded out;
  Status status = [&]() -> Status {
    fmt::WriterOptions options;
    options.features = header.features;
    options.created_unix_ns = header.created_unix_ns;
    PTSCOPE_ASSIGN_OR_RETURN(auto writer, fmt::ArchiveWriter::Create(scratch, options));
    for (const fmt::Chunk* chunk : chunks) {
      uint64_t begin = writer->bytes_written();
      PTSCOPE_TRY(writer->Write(*chunk));
      out.ranges.emplace_back(begin, writer->bytes_written());
    }
    if (with_end) {
      uint64_t begin = writer->bytes_written();
      // An ordinary Write, not Close(): the count is the edited archive's, not the scratch's.
      PTSCOPE_TRY(writer->Write(fmt::EndChunk{end_count}));
      out.ranges.emplace_back(begin, writer->bytes_written());
    }
    writer.reset();
    PTSCOPE_ASSIGN_OR_RETURN(out.bytes, ReadWholeFile(scratch));
    return Ok();
  }();
  ::unlink(scratch.c_str());
  if (!status) return std::move(status).error();
  return out;
}

}  // namespace

Result<SplicedArchive> ReadForSplice(const std::string& path) {
  SplicedArchive a;
  a.path = path;
  PTSCOPE_ASSIGN_OR_RETURN(a.bytes, ReadWholeFile(path));
  PTSCOPE_ASSIGN_OR_RETURN(auto reader, fmt::ArchiveReader::FromBytes(a.bytes, path));
  a.header = reader->header();
  // The reader validated the header, so header_size is within the file.
  a.header_size = a.bytes[kHeaderSizeOffset] | (uint64_t{a.bytes[kHeaderSizeOffset + 1]} << 8);
  a.end_offset = a.bytes.size();
  while (std::optional<fmt::Chunk> chunk = reader->Next()) {
    const fmt::ChunkLocation& at = reader->last_location();
    if (const auto* end = std::get_if<fmt::EndChunk>(&*chunk)) {
      a.complete = true;
      a.end_offset = at.offset;
      a.end_count = end->chunk_count;
      break;
    }
    a.chunks.push_back(std::move(*chunk));
    a.chunk_begin.push_back(at.offset);
    a.chunk_end.push_back(at.offset + kChunkHeaderBytes + PaddedTo8(at.stored_size));
  }
  if (!reader->damage().empty()) {
    return MakeError(reader->damage().front().code,
                     path + ": " + fmt::DescribeDamage(reader->damage()) +
                         "; the archive must be intact to be rewritten (pt-archive verify shows "
                         "the damage)");
  }
  if (!a.complete) a.end_count = reader->chunks_read();
  return a;
}

Result<std::vector<uint8_t>> Splice(const SplicedArchive& archive, const SpliceEdits& edits,
                                    const std::string& scratch_dir) {
  fmt::FileHeader header = archive.header;
  header.features |= edits.set_features;
  bool new_header = header.features != archive.header.features;
  if (!new_header && edits.replace.empty() && edits.append.empty()) return archive.bytes;

  std::vector<const fmt::Chunk*> to_encode;
  for (const auto& [index, chunk] : edits.replace) {
    if (index >= archive.chunks.size()) {
      return MakeError(Errc::kInvalidArgument, archive.path + ": no chunk " +
                                                   std::to_string(index) + " to replace");
    }
    to_encode.push_back(&chunk);
  }
  for (const fmt::Chunk& chunk : edits.append) to_encode.push_back(&chunk);
  PTSCOPE_ASSIGN_OR_RETURN(
      Encoded encoded, EncodeChunks(to_encode, archive.complete,
                                    archive.end_count + edits.append.size(), header, scratch_dir));

  std::vector<uint8_t> out;
  out.reserve(archive.bytes.size() + encoded.bytes.size());
  if (new_header) {
    Append(out, encoded.bytes, 0, encoded.ranges.empty() ? encoded.bytes.size()
                                                         : encoded.ranges.front().first);
  } else {
    Append(out, archive.bytes, 0, archive.header_size);
  }
  // Bytes between known chunks (unknown chunk types of newer versions) are copied as they are.
  uint64_t copied_to = archive.header_size;
  size_t next_encoded = 0;
  for (const auto& [index, chunk] : edits.replace) {
    Append(out, archive.bytes, copied_to, archive.chunk_begin[index]);
    auto [begin, end] = encoded.ranges[next_encoded++];
    Append(out, encoded.bytes, begin, end);
    copied_to = archive.chunk_end[index];
  }
  Append(out, archive.bytes, copied_to, archive.end_offset);
  for (; next_encoded < encoded.ranges.size(); ++next_encoded) {  // appended chunks, then End
    auto [begin, end] = encoded.ranges[next_encoded];
    Append(out, encoded.bytes, begin, end);
  }
  return out;
}

Status WriteFileAtomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::string temp = DirOf(path) + "/.pt-archive-XXXXXX";
  int fd = ::mkstemp(temp.data());  // mode 0600
  if (fd < 0) return Errno(DirOf(path), "cannot create a temporary file", errno);
  Status status = WriteAllTo(fd, temp, bytes);
  if (status && ::fchmod(fd, 0600) != 0) status = Errno(temp, "cannot set mode 0600", errno);
  if (status && ::fsync(fd) != 0) status = Errno(temp, "fsync failed", errno);
  if (::close(fd) != 0 && status) status = Errno(temp, "close failed", errno);
  if (status && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = Errno(path, "cannot replace", errno);
  }
  if (!status) ::unlink(temp.c_str());
  return status;
}

}  // namespace ptscope::tools
