// ArchiveReader: trusts no size in the file. Every field is bounds-checked, raw sizes are capped
// before allocation, and the first damaged chunk ends iteration with a Damage that names the
// chunk index, its file offset and the field at fault.
#include <fcntl.h>
#include <lz4.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "archive_layout.h"
#include "byte_io.h"
#include "chunk_codec.h"
#include "crc32c.h"
#include "ptscope/file_read.h"
#include "ptscope/format.h"

namespace ptscope::format {
namespace {


std::string Checksums(uint32_t stored, uint32_t computed) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "(stored 0x%08x, computed 0x%08x)", stored, computed);
  return buf;
}

// Why these 8 bytes are not our magic, in words a user can act on.
std::string DescribeBadMagic(std::span<const uint8_t> head, const std::string& path) {
  if (head.size() >= 8 && std::memcmp(head.data(), "PERFILE2", 8) == 0) {
    return "a perf.data file (magic PERFILE2), not a ptscope archive (.ptar): pt-decode reads it "
           "as it is (pt-decode " + path + "); pt-archive import-perf " + path +
           " -o OUT.ptar converts it";
  }
  bool ptar_prefix = head.size() >= 4 && std::memcmp(head.data(), "PTAR", 4) == 0;
  if (ptar_prefix) {
    return "bad magic at offset 0: the line-ending bytes were altered (the archive was "
           "transferred in text mode; copy it again in binary mode)";
  }
  std::string found;
  for (size_t i = 0; i < head.size() && i < 8; ++i) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%s%02x", i ? " " : "", head[i]);
    found += buf;
  }
  return "not a ptscope archive (.ptar): bad magic at offset 0 (found " + found + ")";
}

}  // namespace

ArchiveReader::ArchiveReader(std::vector<uint8_t> bytes, int fd, uint64_t size, std::string name)
    : bytes_(std::move(bytes)), fd_(fd), size_(size), name_(std::move(name)) {}

ArchiveReader::~ArchiveReader() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<ArchiveReader>> ArchiveReader::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    Errc code = ErrcFromErrno(err);
    return MakeError(code, path + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    bool is_dir = S_ISDIR(st.st_mode);
    ::close(fd);
    return MakeError(Errc::kIo, path + (is_dir ? ": is a directory, not an archive file"
                                               : ": not a regular file"));
  }
  // The size is taken once: bytes appended later (a recorder still writing) are not read.
  std::unique_ptr<ArchiveReader> reader(
      new ArchiveReader({}, fd, static_cast<uint64_t>(st.st_size), path));
  PTSCOPE_TRY(reader->ParseHeader());
  return reader;
}

Result<std::unique_ptr<ArchiveReader>> ArchiveReader::FromBytes(std::vector<uint8_t> bytes,
                                                                std::string name) {
  uint64_t size = bytes.size();
  std::unique_ptr<ArchiveReader> reader(
      new ArchiveReader(std::move(bytes), -1, size, std::move(name)));
  PTSCOPE_TRY(reader->ParseHeader());
  return reader;
}

Result<std::span<const uint8_t>> ArchiveReader::ReadAt(uint64_t offset, uint64_t length,
                                                       std::vector<uint8_t>& buffer,
                                                       bool read_ahead) {
  length = offset < size_ ? std::min(length, size_ - offset) : 0;
  if (fd_ < 0) return std::span<const uint8_t>(bytes_.data() + offset, length);
  if (buffer.size() < length) buffer.resize(length);
  const FileRead read =
      read_ahead ? window_.Read(fd_, offset, static_cast<size_t>(length), buffer.data())
                 : ReadFileAt(fd_, offset, static_cast<size_t>(length), buffer.data());
  if (read.error != 0) {
    return MakeError(Errc::kIo, "read failed at offset " + std::to_string(offset + read.bytes) +
                                    ": " + std::strerror(read.error));
  }
  if (read.bytes < length) size_ = offset + read.bytes;  // the file shrank since Open()
  return std::span<const uint8_t>(buffer.data(), read.bytes);
}

Status ArchiveReader::ParseHeader() {
  const std::string& n = name_;
  // `head`: the first kMaxFileHeaderSize bytes (all of a shorter file), all a header can span.
  // Not through the window: Open() reads no chunk, and a file cut after Open() is then read
  // cut, at the first chunk.
  Result<std::span<const uint8_t>> read =
      ReadAt(0, layout::kMaxFileHeaderSize, head_buffer_, /*read_ahead=*/false);
  if (!read) return MakeError(Errc::kIo, n + ": " + read.error().message);
  std::span<const uint8_t> head = *read;
  uint64_t size = size_;
  if (size == 0) return MakeError(Errc::kTruncated, n + ": empty file (0 bytes), not an archive");
  size_t magic_len = std::min<size_t>(head.size(), sizeof layout::kFileMagic);
  if (std::memcmp(head.data(), layout::kFileMagic, magic_len) != 0) {
    return MakeError(Errc::kBadMagic, n + ": " + DescribeBadMagic(head, n));
  }
  // The first 16 bytes (magic, versions, header size) keep this layout in every version, so the
  // version check comes before anything a newer major version might have changed.
  if (size < layout::kHeaderCrc + 4) {
    return MakeError(Errc::kTruncated, n + ": truncated file header: " + std::to_string(size) +
                                           " of " + std::to_string(layout::kFileHeaderSize) +
                                           " bytes at offset 0");
  }
  const uint8_t* h = head.data();
  header_.version_major = static_cast<uint16_t>(LoadLe(h + layout::kHeaderVersionMajor, 2));
  header_.version_minor = static_cast<uint16_t>(LoadLe(h + layout::kHeaderVersionMinor, 2));
  header_.min_reader_major = static_cast<uint16_t>(LoadLe(h + layout::kHeaderMinReaderMajor, 2));
  uint64_t header_size = LoadLe(h + layout::kHeaderSizeField, 2);
  if (header_.min_reader_major > kVersionMajor) {
    return MakeError(Errc::kUnsupportedVersion,
                     n + ": archive needs reader version " +
                         std::to_string(header_.min_reader_major) + ", this is version " +
                         std::to_string(kVersionMajor) + ": upgrade ptscope");
  }
  if (header_size < layout::kFileHeaderSize || header_size > layout::kMaxFileHeaderSize ||
      header_size % 8 != 0) {
    return MakeError(Errc::kCorrupt, n + ": invalid header_size " + std::to_string(header_size) +
                                         " at offset " +
                                         std::to_string(layout::kHeaderSizeField) +
                                         " (expected 40..4096, a multiple of 8)");
  }
  if (size < header_size) {
    return MakeError(Errc::kTruncated, n + ": truncated file header: " + std::to_string(size) +
                                           " of " + std::to_string(header_size) +
                                           " bytes at offset 0");
  }
  uint32_t stored_crc = static_cast<uint32_t>(LoadLe(h + layout::kHeaderCrc, 4));
  uint32_t computed = Crc32cExtend(0, h, layout::kHeaderCrc);
  const uint8_t zeros[4] = {0, 0, 0, 0};
  computed = Crc32cExtend(computed, zeros, 4);
  computed = Crc32cExtend(computed, h + layout::kHeaderCrc + 4,
                          header_size - layout::kHeaderCrc - 4);
  if (stored_crc != computed) {
    return MakeError(Errc::kChecksum, n + ": file header checksum mismatch at offset " +
                                          std::to_string(layout::kHeaderCrc) + " " +
                                          Checksums(stored_crc, computed));
  }
  header_.features = LoadLe(h + layout::kHeaderFeatures, 8);
  header_.created_unix_ns = LoadLe(h + layout::kHeaderCreated, 8);
  pos_ = header_size;
  return Ok();
}

// A chunk may be up to 1 GiB: its buffers are not kept at that size for the next chunk (an
// archive of large blobs would otherwise hold its largest payload twice for as long as it is
// read).
void ArchiveReader::ReleaseLargeBuffers() {
  constexpr size_t kKeep = 16u << 20;
  if (unpacked_.capacity() > kKeep) std::vector<uint8_t>().swap(unpacked_);
  if (payload_buffer_.capacity() > kKeep) std::vector<uint8_t>().swap(payload_buffer_);
}

// What checking the chunk whose header starts at one offset found.
struct ArchiveReader::ChunkOutcome {
  enum Kind {
    kIntact,   // `chunk` holds it
    kSkipped,  // intact, of a type this version does not know
    kFailed,   // damaged: `code` and `what` say how
    kShrunk,   // the file became shorter while it was read: check again
  };
  Kind kind = kFailed;
  std::optional<Chunk> chunk;
  ChunkLocation location;
  // Where the next chunk starts, when the header was intact (its sizes are then trustworthy,
  // whatever else is damaged) and the chunk fits in the file; 0 otherwise.
  uint64_t next = 0;
  Errc code = Errc::kCorrupt;
  std::string what;
};

ArchiveReader::ChunkOutcome ArchiveReader::ReadChunk(uint64_t at, bool skip_pt_data,
                                                     bool skip_blob_data) {
  ChunkOutcome out;
  auto fail = [&out](Errc code, std::string what) {
    out.kind = ChunkOutcome::kFailed;
    out.code = code;
    out.what = std::move(what);
    return std::move(out);
  };
  const uint64_t left = at < size_ ? size_ - at : 0;
  if (left < layout::kChunkHeaderSize) {
    return fail(Errc::kTruncated, "truncated chunk header (" + std::to_string(left) + " of " +
                                      std::to_string(layout::kChunkHeaderSize) +
                                      " bytes; the writer was cut off)");
  }
  Result<std::span<const uint8_t>> head = ReadAt(at, layout::kChunkHeaderSize, head_buffer_);
  if (!head) return fail(Errc::kIo, head.error().message);
  if (head->size() < layout::kChunkHeaderSize) {
    out.kind = ChunkOutcome::kShrunk;
    return out;
  }
  const uint8_t* h = head->data();
  uint32_t sync = static_cast<uint32_t>(LoadLe(h + layout::kChunkSyncOff, 4));
  if (sync != layout::kChunkSync) {
    return fail(Errc::kCorrupt, "bad chunk sync " + HexAddress(sync) + " (expected " +
                                    HexAddress(layout::kChunkSync) + " \"PTCK\")");
  }
  uint32_t stored_hcrc = static_cast<uint32_t>(LoadLe(h + layout::kChunkHeaderCrcOff, 4));
  uint32_t hcrc = Crc32cExtend(0, h, layout::kChunkHeaderCrcOff);
  if (stored_hcrc != hcrc) {
    return fail(Errc::kChecksum, "chunk header checksum mismatch " + Checksums(stored_hcrc, hcrc));
  }
  uint16_t type = static_cast<uint16_t>(LoadLe(h + layout::kChunkTypeOff, 2));
  uint16_t flags = static_cast<uint16_t>(LoadLe(h + layout::kChunkFlagsOff, 2));
  uint64_t stored = LoadLe(h + layout::kChunkStoredOff, 8);
  uint64_t raw = LoadLe(h + layout::kChunkRawOff, 8);
  uint64_t body_left = left - layout::kChunkHeaderSize;
  // The header is intact: its stored_size says where the next chunk starts.
  if (stored <= body_left && layout::PaddedTo8(stored) <= body_left) {
    out.next = at + layout::kChunkHeaderSize + layout::PaddedTo8(stored);
  }
  if ((flags & ~layout::kChunkKnownFlags) != 0) {
    return fail(Errc::kCorrupt, "unknown flags " + HexAddress(flags) + " in field 'flags'");
  }
  bool lz4 = (flags & layout::kChunkFlagLz4) != 0;
  if (raw > layout::kMaxChunkRawSize) {
    return fail(Errc::kCorrupt, "field 'raw_size' = " + std::to_string(raw) +
                                    " exceeds the 1 GiB chunk limit");
  }
  // LZ4 expands at most 255:1 (a match length grows by 255 per extra byte), so a payload that
  // claims more cannot be genuine: refused before a buffer of raw_size is allocated.
  if (lz4 && stored < (raw + layout::kLz4MaxRatio - 1) / layout::kLz4MaxRatio) {
    return fail(Errc::kCorrupt, "field 'raw_size' = " + std::to_string(raw) +
                                    " is more than an lz4 payload of 'stored_size' = " +
                                    std::to_string(stored) + " bytes can hold (at most " +
                                    std::to_string(layout::kLz4MaxRatio) + " times as much)");
  }
  if (!lz4 && stored != raw) {
    return fail(Errc::kCorrupt, "field 'stored_size' = " + std::to_string(stored) +
                                    " differs from 'raw_size' = " + std::to_string(raw) +
                                    " in an uncompressed chunk");
  }
  if (out.next == 0) {
    return fail(Errc::kTruncated, "truncated payload: 'stored_size' = " + std::to_string(stored) +
                                      " (padded " + std::to_string(layout::PaddedTo8(stored)) +
                                      ") but only " + std::to_string(body_left) + " bytes left");
  }
  Result<std::span<const uint8_t>> padded =
      ReadAt(at + layout::kChunkHeaderSize, layout::PaddedTo8(stored), payload_buffer_);
  if (!padded) return fail(Errc::kIo, padded.error().message);
  if (padded->size() < layout::PaddedTo8(stored)) {
    out.kind = ChunkOutcome::kShrunk;
    return out;
  }
  const uint8_t* payload = padded->data();
  uint32_t stored_pcrc = static_cast<uint32_t>(LoadLe(h + layout::kChunkPayloadCrcOff, 4));
  uint32_t pcrc = Crc32cExtend(0, payload, stored);
  if (stored_pcrc != pcrc) {
    return fail(Errc::kChecksum, "payload checksum mismatch " + Checksums(stored_pcrc, pcrc));
  }
  // Padding must be zero so that every byte of a chunk is covered by some check.
  for (uint64_t i = stored; i < layout::PaddedTo8(stored); ++i) {
    if (payload[i] != 0) {
      return fail(Errc::kCorrupt, "nonzero padding byte at offset " +
                                      HexAddress(at + layout::kChunkHeaderSize + i));
    }
  }
  out.location = ChunkLocation{at, static_cast<ChunkType>(type), flags, stored, raw};
  if (!IsKnownChunkType(type)) {  // from a newer minor version: skipped, it is intact
    out.kind = ChunkOutcome::kSkipped;
    return out;
  }
  std::span<const uint8_t> body(payload, stored);
  if (lz4) {
    if (unpacked_.size() < raw) unpacked_.resize(raw);
    // A PtData chunk whose bytes are skipped: only its fields are decompressed (its bytes, most
    // of an archive, are decompressed and checked when ReadChunkAt reads them again: decoding
    // them all here as well was a quarter of pt-decode's start-up). DecodePayload reads no
    // further than kPtDataFieldBytes then; the rest of `body` is allocated, never read.
    const bool fields_only =
        skip_pt_data && type == static_cast<uint16_t>(ChunkType::kPtData) && raw > kPtDataFieldBytes;
    const uint64_t want = fields_only ? kPtDataFieldBytes : raw;
    const int n =
        fields_only
            ? LZ4_decompress_safe_partial(reinterpret_cast<const char*>(payload),
                                          reinterpret_cast<char*>(unpacked_.data()),
                                          static_cast<int>(stored), static_cast<int>(want),
                                          static_cast<int>(raw))
            : LZ4_decompress_safe(reinterpret_cast<const char*>(payload),
                                  reinterpret_cast<char*>(unpacked_.data()),
                                  static_cast<int>(stored), static_cast<int>(raw));
    if (n < 0 || static_cast<uint64_t>(n) != want) {
      return fail(Errc::kCorrupt, "lz4 payload does not decompress to 'raw_size' = " +
                                      std::to_string(raw) + " bytes");
    }
    body = std::span<const uint8_t>(unpacked_.data(), raw);
  }
  Result<Chunk> chunk =
      DecodePayload(static_cast<ChunkType>(type), body,
                    DataHandling{skip_pt_data, skip_blob_data, &out.location.data_size});
  ReleaseLargeBuffers();
  if (!chunk) return fail(Errc::kCorrupt, chunk.error().message);
  out.kind = ChunkOutcome::kIntact;
  out.chunk = std::move(*chunk);
  return out;
}

Result<uint64_t> ArchiveReader::FindChunkHeader(uint64_t from) {
  // Chunks start at multiples of 8 (the file header's size is one, and every chunk is padded to
  // one). The file is read in windows that overlap by a header, so none is missed at a seam.
  constexpr uint64_t kWindow = 1u << 20;
  for (uint64_t at = layout::PaddedTo8(from); at + layout::kChunkHeaderSize <= size_;) {
    PTSCOPE_ASSIGN_OR_RETURN(std::span<const uint8_t> window,
                             ReadAt(at, kWindow + layout::kChunkHeaderSize, payload_buffer_));
    if (window.size() < layout::kChunkHeaderSize) break;
    const uint64_t last = window.size() - layout::kChunkHeaderSize;
    for (uint64_t i = 0; i <= last; i += 8) {
      const uint8_t* h = window.data() + i;
      if (LoadLe(h + layout::kChunkSyncOff, 4) == layout::kChunkSync &&
          LoadLe(h + layout::kChunkHeaderCrcOff, 4) ==
              Crc32cExtend(0, h, layout::kChunkHeaderCrcOff)) {
        return at + i;
      }
    }
    at += last + 8;
  }
  return size_;
}

std::optional<Chunk> ArchiveReader::Next() {
  while (pos_ < size_) {
    const uint64_t at = pos_;
    auto damaged = [&](uint64_t end, Errc code, const std::string& what) {
      damage_.push_back(Damage{at, end, chunks_read_, code,
                               "chunk " + std::to_string(chunks_read_) + " at offset " + HexAddress(at) +
                                   ": " + what});
      pos_ = end;
    };
    if (saw_end_) {
      damaged(size_, Errc::kCorrupt, std::to_string(size_ - at) + " bytes after the End chunk");
      break;
    }
    ChunkOutcome outcome = ReadChunk(at, skip_pt_data_, skip_blob_data_);
    if (outcome.kind == ChunkOutcome::kShrunk) continue;  // size_ is smaller now: check again
    if (outcome.kind == ChunkOutcome::kIntact) {
      if (auto* end = std::get_if<EndChunk>(&*outcome.chunk)) {
        // Chunks lost to damage before it are not counted; without damage the count must agree.
        if (damage_.empty() && end->chunk_count != chunks_read_) {
          outcome.kind = ChunkOutcome::kFailed;
          outcome.what = "End chunk field 'chunk_count' = " + std::to_string(end->chunk_count) +
                         " but " + std::to_string(chunks_read_) + " chunks precede it";
        } else {
          saw_end_ = true;
        }
      }
    }
    if (outcome.kind == ChunkOutcome::kIntact || outcome.kind == ChunkOutcome::kSkipped) {
      pos_ = outcome.next;
      ++chunks_read_;
      if (outcome.kind == ChunkOutcome::kSkipped) {
        ++chunks_skipped_;
        continue;
      }
      last_location_ = outcome.location;
      return std::move(outcome.chunk);
    }
    // Damaged. Only its own bytes are lost: reading goes on at the next intact chunk header,
    // looked for after the chunk when its header was intact (its size is then known), else
    // after the damaged header. A truncated chunk is the cut end of the file (a torn header has
    // fewer than 32 bytes after it; a torn payload's size is checksummed): nothing follows it.
    // After a read error nothing further can be read.
    uint64_t resume = size_;
    if (outcome.code != Errc::kIo && outcome.code != Errc::kTruncated) {
      Result<uint64_t> found = FindChunkHeader(outcome.next != 0 ? outcome.next : at + 8);
      if (!found) {
        damaged(size_, Errc::kIo, found.error().message);
        break;
      }
      resume = *found;
    }
    damaged(resume, outcome.code, outcome.what);
  }
  return std::nullopt;
}

Result<Chunk> ArchiveReader::ReadChunkAt(uint64_t offset) {
  // Made only for an error: every PT chunk is read here once more as it is decoded.
  auto where = [&] { return name_ + ": chunk at offset " + HexAddress(offset); };
  if (offset >= size_ || offset % 8 != 0) {
    return MakeError(Errc::kCorrupt, where() + ": no chunk starts there (offset past the end, or "
                                               "unaligned)");
  }
  ChunkOutcome outcome = ReadChunk(offset, false, false);
  while (outcome.kind == ChunkOutcome::kShrunk) outcome = ReadChunk(offset, false, false);
  if (outcome.kind == ChunkOutcome::kIntact) return std::move(*outcome.chunk);
  if (outcome.kind == ChunkOutcome::kSkipped) {
    return MakeError(Errc::kCorrupt, where() + ": a chunk of a type this version does not know");
  }
  return MakeError(outcome.code, where() + ": " + outcome.what);
}

std::string DescribeDamage(const std::vector<Damage>& damage) {
  constexpr size_t kListed = 3;
  std::string text;
  for (size_t i = 0; i < damage.size() && i < kListed; ++i) {
    text += i == 0 ? "" : "; ";
    if (damage[i].end != 0) {  // 0: not a range of this file (import.damage)
      text += "damaged [" + HexAddress(damage[i].offset) + ", " + HexAddress(damage[i].end) + "): ";
    }
    text += damage[i].reason;
  }
  if (damage.size() > kListed) {
    text += "; and " + std::to_string(damage.size() - kListed) +
            " more damaged ranges (pt-archive verify lists them)";
  }
  return text;
}

std::optional<std::string> Archive::Get(std::string_view key) const {
  std::optional<std::string> value;
  for (const auto& [k, v] : metadata) {
    if (k == key) value = v;
  }
  return value;
}

namespace {

Archive Collect(ArchiveReader& reader, const ReadOptions& options) {
  Archive a;
  a.path = reader.name();
  a.header = reader.header();
  reader.SkipData(!options.keep_pt_bytes, !options.keep_blob_bytes);
  while (std::optional<Chunk> chunk = reader.Next()) {
    std::visit(
        [&a, &reader, &options](auto&& c) {
          using T = std::decay_t<decltype(c)>;
          if constexpr (std::is_same_v<T, MetadataChunk>) {
            for (auto& entry : c.entries) a.metadata.push_back(std::move(entry));
          } else if constexpr (std::is_same_v<T, PtDataChunk>) {
            a.pt_refs.push_back({reader.last_location().offset, reader.last_location().data_size});
            a.pt_data.push_back(std::move(c));
          } else if constexpr (std::is_same_v<T, SidebandAttrChunk>) {
            a.sideband_attrs.push_back(std::move(c));
          } else if constexpr (std::is_same_v<T, SidebandChunk>) {
            if (!options.keep_sideband_bytes) {
              a.sideband_offsets.push_back(reader.last_location().offset);
              std::vector<uint8_t>().swap(c.records);  // freed: read again where used
            }
            a.sideband.push_back(std::move(c));
          } else if constexpr (std::is_same_v<T, ModuleChunk>) {
            a.modules.push_back(std::move(c));
          } else if constexpr (std::is_same_v<T, BlobChunk>) {
            a.blob_refs.push_back({reader.last_location().offset, reader.last_location().data_size});
            a.blobs.push_back(std::move(c));
          } else if constexpr (std::is_same_v<T, MarkerChunk>) {
            a.markers.push_back(std::move(c));
          } else if constexpr (std::is_same_v<T, TimeSyncChunk>) {
            a.time_syncs.push_back(std::move(c));
          }
        },
        std::move(*chunk));
  }
  a.chunks_read = reader.chunks_read();
  a.complete = reader.complete();
  a.damage = reader.damage();
  return a;
}

// What the metadata adds to the chunks: the time conversion (checked), and the damage of the
// perf.data the archive was imported from (a partial capture reads as one).
Result<Archive> WithMetadata(Archive archive) {
  PTSCOPE_ASSIGN_OR_RETURN(archive.time, ParseTimeConversion(archive.metadata, archive.path));
  if (std::optional<std::string> imported = archive.Get("import.damage")) {
    archive.damage.insert(archive.damage.begin(),
                          Damage{0, 0, 0, Errc::kTruncated, "imported from " + *imported});
  }
  return archive;
}

}  // namespace

Result<Archive> ReadArchive(const std::string& path, const ReadOptions& options) {
  PTSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<ArchiveReader> reader, ArchiveReader::Open(path));
  return WithMetadata(Collect(*reader, options));
}

Result<Archive> ReadArchiveFromBytes(std::vector<uint8_t> bytes, std::string name) {
  PTSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<ArchiveReader> reader,
                           ArchiveReader::FromBytes(std::move(bytes), std::move(name)));
  return WithMetadata(Collect(*reader, ReadOptions{}));
}

Result<std::vector<uint8_t>> LoadBlobData(const Archive& archive, size_t index) {
  PTSCOPE_CHECK(index < archive.blobs.size());
  const BlobChunk& blob = archive.blobs[index];
  if (index >= archive.blob_refs.size() || archive.blob_refs[index].size == blob.data.size()) {
    return blob.data;  // kept (or built in memory)
  }
  PTSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<ArchiveReader> reader,
                           ArchiveReader::Open(archive.path));
  PTSCOPE_ASSIGN_OR_RETURN(Chunk chunk, reader->ReadChunkAt(archive.blob_refs[index].chunk_offset));
  auto* again = std::get_if<BlobChunk>(&chunk);
  if (again == nullptr || again->data.size() != archive.blob_refs[index].size) {
    return MakeError(Errc::kCorrupt, archive.path + ": chunk at offset " +
                                         HexAddress(archive.blob_refs[index].chunk_offset) +
                                         ": no longer the blob it was (the file changed since it "
                                         "was read)");
  }
  return std::move(again->data);
}

std::string HexAddress(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::string ToHex(const std::vector<uint8_t>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xF]);
  }
  return out;
}

std::optional<std::vector<uint8_t>> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::vector<uint8_t> out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return out;
}

}  // namespace ptscope::format
