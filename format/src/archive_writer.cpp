// ArchiveWriter: every chunk is assembled in memory (header + payload + padding) and handed to
// the kernel in one write(2), so a writer killed at any instant leaves whole chunks plus at most
// one torn tail that readers detect by its size or checksums. A write that fails (no space, I/O
// error) is cut off again: the file stays a readable prefix of the capture, without an End chunk.
#include <lz4.h>

#include <ctime>

#include "archive_layout.h"
#include "byte_io.h"
#include "chunk_codec.h"
#include "crc32c.h"
#include "ptscope/format.h"
#include "ptscope/output_file.h"

namespace ptscope::format {
namespace {

// Below this, lz4 framing overhead rarely pays off.
constexpr size_t kMinCompressSize = 64;

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

ArchiveWriter::ArchiveWriter(std::unique_ptr<OutputFile> file, WriterOptions options)
    : file_(std::move(file)), options_(options) {}

// Without Close() there is no End chunk: the archive reads back as incomplete.
ArchiveWriter::~ArchiveWriter() = default;

const std::string& ArchiveWriter::path() const { return file_->path(); }

Result<std::unique_ptr<ArchiveWriter>> ArchiveWriter::Create(const std::string& path,
                                                             const WriterOptions& options) {
  PTSCOPE_ASSIGN_OR_RETURN(OutputFile created, options.replace_when_closed
                                                    ? OutputFile::CreateReplacing(path, 0600)
                                                    : OutputFile::CreateInPlace(path, 0600));
  auto file = std::make_unique<OutputFile>(std::move(created));
  FileHeader header;
  header.features = options.features;
  header.created_unix_ns = options.created_unix_ns ? options.created_unix_ns : NowUnixNs();
  std::vector<uint8_t> bytes = EncodeFileHeader(header);
  if (Status written = file->Write(bytes.data(), bytes.size()); !written) {
    file->Discard();  // not even a header: nothing a reader could use
    return std::move(written).error();
  }
  return std::unique_ptr<ArchiveWriter>(new ArchiveWriter(std::move(file), options));
}

Status ArchiveWriter::Write(const Chunk& chunk) {
  if (!file_->is_open()) return MakeError(Errc::kInvalidArgument, path() + ": archive already closed");
  std::vector<uint8_t> buf(layout::kChunkHeaderSize);
  EncodePayload(chunk, buf);
  uint64_t raw_size = buf.size() - layout::kChunkHeaderSize;
  if (raw_size > layout::kMaxChunkRawSize) {
    return MakeError(Errc::kInvalidArgument,
                     path() + ": " + ChunkTypeName(TypeOf(chunk)) + " chunk of " +
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
  const uint64_t before = file_->bytes_written();
  if (Status written = file_->Write(buf.data(), buf.size()); !written) {
    // Cut a partly written chunk off again (e.g. after ENOSPC), so that chunks written later by
    // a caller that retries do not land behind a torn one where readers would never reach them.
    (void)file_->TruncateTo(before);
    return MakeError(written.error().code,
                     written.error().message + "; the " + std::to_string(chunks_written_) +
                         (chunks_written_ == 1 ? " chunk written before stays"
                                               : " chunks written before stay") +
                         " readable (the archive is incomplete)");
  }
  if (options_.sync_each_chunk) PTSCOPE_TRY(file_->Sync());
  ++chunks_written_;
  return Ok();
}

uint64_t ArchiveWriter::bytes_written() const { return file_->bytes_written(); }

Status ArchiveWriter::Flush() {
  if (!file_->is_open()) return MakeError(Errc::kInvalidArgument, path() + ": archive already closed");
  return file_->Sync();
}

Status ArchiveWriter::Close() {
  if (!file_->is_open()) return MakeError(Errc::kInvalidArgument, path() + ": archive already closed");
  // What was written must be on the device before the End chunk says the archive is whole: a
  // write-back error (EIO from a failing disk) surfaces only at a sync, which reports it once.
  // After one, no End chunk (or a torn one cut off again): the archive reads as incomplete.
  const char* incomplete = "; the archive is left without its End chunk (incomplete)";
  if (Status synced = file_->Sync(); !synced) {
    return MakeError(synced.error().code, synced.error().message + incomplete);
  }
  const uint64_t before = file_->bytes_written();
  PTSCOPE_TRY(Write(EndChunk{chunks_written_}));
  if (Status synced = file_->Sync(); !synced) {
    (void)file_->TruncateTo(before);
    return MakeError(synced.error().code, synced.error().message + incomplete);
  }
  return file_->Commit();
}

void ArchiveWriter::Discard() { file_->Discard(); }

}  // namespace ptscope::format
