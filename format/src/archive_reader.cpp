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

std::string Hex(uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

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
                                                       std::vector<uint8_t>& buffer) {
  length = offset < size_ ? std::min(length, size_ - offset) : 0;
  if (fd_ < 0) return std::span<const uint8_t>(bytes_.data() + offset, length);
  if (buffer.size() < length) buffer.resize(length);
  const FileRead read = ReadFileAt(fd_, offset, static_cast<size_t>(length), buffer.data());
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
  Result<std::span<const uint8_t>> read = ReadAt(0, layout::kMaxFileHeaderSize, head_buffer_);
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

std::optional<Chunk> ArchiveReader::Next() {
  while (!damage_ && pos_ < size_) {
    uint64_t at = pos_;
    auto fail = [&](Errc code, const std::string& what) -> std::optional<Chunk> {
      damage_ = Damage{at, chunks_read_, code,
                       "chunk " + std::to_string(chunks_read_) + " at offset " + Hex(at) + ": " +
                           what};
      return std::nullopt;
    };
    uint64_t left = size_ - at;
    if (saw_end_) return fail(Errc::kCorrupt, std::to_string(left) + " bytes after the End chunk");
    if (left < layout::kChunkHeaderSize) {
      return fail(Errc::kTruncated, "truncated chunk header (" + std::to_string(left) + " of " +
                                        std::to_string(layout::kChunkHeaderSize) +
                                        " bytes; the writer was cut off)");
    }
    Result<std::span<const uint8_t>> head = ReadAt(at, layout::kChunkHeaderSize, head_buffer_);
    if (!head) return fail(Errc::kIo, head.error().message);
    if (head->size() < layout::kChunkHeaderSize) continue;  // the file shrank: check again
    const uint8_t* h = head->data();
    uint32_t sync = static_cast<uint32_t>(LoadLe(h + layout::kChunkSyncOff, 4));
    if (sync != layout::kChunkSync) {
      return fail(Errc::kCorrupt, "bad chunk sync " + Hex(sync) + " (expected " +
                                      Hex(layout::kChunkSync) + " \"PTCK\")");
    }
    uint32_t stored_hcrc = static_cast<uint32_t>(LoadLe(h + layout::kChunkHeaderCrcOff, 4));
    uint32_t hcrc = Crc32cExtend(0, h, layout::kChunkHeaderCrcOff);
    if (stored_hcrc != hcrc) {
      return fail(Errc::kChecksum, "chunk header checksum mismatch " +
                                       Checksums(stored_hcrc, hcrc));
    }
    uint16_t type = static_cast<uint16_t>(LoadLe(h + layout::kChunkTypeOff, 2));
    uint16_t flags = static_cast<uint16_t>(LoadLe(h + layout::kChunkFlagsOff, 2));
    uint64_t stored = LoadLe(h + layout::kChunkStoredOff, 8);
    uint64_t raw = LoadLe(h + layout::kChunkRawOff, 8);
    if ((flags & ~layout::kChunkKnownFlags) != 0) {
      return fail(Errc::kCorrupt, "unknown flags " + Hex(flags) + " in field 'flags'");
    }
    bool lz4 = (flags & layout::kChunkFlagLz4) != 0;
    if (raw > layout::kMaxChunkRawSize) {
      return fail(Errc::kCorrupt, "field 'raw_size' = " + std::to_string(raw) +
                                      " exceeds the 1 GiB chunk limit");
    }
    if (!lz4 && stored != raw) {
      return fail(Errc::kCorrupt, "field 'stored_size' = " + std::to_string(stored) +
                                      " differs from 'raw_size' = " + std::to_string(raw) +
                                      " in an uncompressed chunk");
    }
    uint64_t body_left = left - layout::kChunkHeaderSize;
    if (stored > body_left || layout::PaddedTo8(stored) > body_left) {
      return fail(Errc::kTruncated, "truncated payload: 'stored_size' = " +
                                        std::to_string(stored) + " (padded " +
                                        std::to_string(layout::PaddedTo8(stored)) + ") but only " +
                                        std::to_string(body_left) + " bytes left");
    }
    Result<std::span<const uint8_t>> padded =
        ReadAt(at + layout::kChunkHeaderSize, layout::PaddedTo8(stored), payload_buffer_);
    if (!padded) return fail(Errc::kIo, padded.error().message);
    if (padded->size() < layout::PaddedTo8(stored)) continue;  // the file shrank: check again
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
                                        Hex(at + layout::kChunkHeaderSize + i));
      }
    }
    pos_ = at + layout::kChunkHeaderSize + layout::PaddedTo8(stored);
    if (!IsKnownChunkType(type)) {  // from a newer minor version: skip, it is intact
      ++chunks_read_;
      ++chunks_skipped_;
      continue;
    }
    std::span<const uint8_t> body(payload, stored);
    if (lz4) {
      if (unpacked_.size() < raw) unpacked_.resize(raw);
      int n = LZ4_decompress_safe(reinterpret_cast<const char*>(payload),
                                  reinterpret_cast<char*>(unpacked_.data()),
                                  static_cast<int>(stored), static_cast<int>(raw));
      if (n < 0 || static_cast<uint64_t>(n) != raw) {
        pos_ = at;
        return fail(Errc::kCorrupt, "lz4 payload does not decompress to 'raw_size' = " +
                                        std::to_string(raw) + " bytes");
      }
      body = std::span<const uint8_t>(unpacked_.data(), raw);
    }
    Result<Chunk> chunk = DecodePayload(static_cast<ChunkType>(type), body);
    if (!chunk) {
      pos_ = at;
      return fail(Errc::kCorrupt, chunk.error().message);
    }
    if (auto* end = std::get_if<EndChunk>(&*chunk)) {
      if (end->chunk_count != chunks_read_) {
        pos_ = at;
        return fail(Errc::kCorrupt, "End chunk field 'chunk_count' = " +
                                        std::to_string(end->chunk_count) + " but " +
                                        std::to_string(chunks_read_) + " chunks precede it");
      }
      saw_end_ = true;
    }
    last_location_ = ChunkLocation{at, static_cast<ChunkType>(type), flags, stored, raw};
    ++chunks_read_;
    return std::move(*chunk);
  }
  return std::nullopt;
}

Result<Chunk> ArchiveReader::ReadChunkAt(uint64_t offset) {
  // Next() from `offset`, with the sequential state put back afterwards. The End chunk's count
  // check does not apply out of sequence, and an End chunk is not what callers come back for.
  const uint64_t pos = pos_, chunks_read = chunks_read_, chunks_skipped = chunks_skipped_;
  const bool saw_end = saw_end_;
  std::optional<Damage> damage = std::move(damage_);
  const ChunkLocation location = last_location_;
  pos_ = offset;
  damage_.reset();
  saw_end_ = false;
  std::optional<Chunk> chunk;
  if (offset < size_ && offset % 8 == 0) chunk = Next();
  std::optional<Damage> found = std::move(damage_);
  if (chunk.has_value() && last_location_.offset != offset) chunk.reset();  // skipped to the next
  pos_ = pos;
  chunks_read_ = chunks_read;
  chunks_skipped_ = chunks_skipped;
  saw_end_ = saw_end;
  damage_ = std::move(damage);
  last_location_ = location;
  if (chunk.has_value()) return std::move(*chunk);
  std::string where = name_ + ": chunk at offset " + Hex(offset);
  if (found.has_value()) {
    // Next() names the chunk by its sequential index, which means nothing here.
    std::string reason = found->reason;
    size_t colon = reason.find(": ");
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
    return MakeError(found->code, where + ": " + reason);
  }
  return MakeError(Errc::kCorrupt, where + ": no intact, known chunk starts there (offset past "
                                           "the end, unaligned, or a skipped chunk type)");
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
  while (std::optional<Chunk> chunk = reader.Next()) {
    std::visit(
        [&a, &reader, &options](auto&& c) {
          using T = std::decay_t<decltype(c)>;
          if constexpr (std::is_same_v<T, MetadataChunk>) {
            for (auto& entry : c.entries) a.metadata.push_back(std::move(entry));
          } else if constexpr (std::is_same_v<T, PtDataChunk>) {
            a.pt_refs.push_back({reader.last_location().offset, c.data.size()});
            if (!options.keep_pt_bytes) std::vector<uint8_t>().swap(c.data);
            a.pt_data.push_back(std::move(c));
          } else if constexpr (std::is_same_v<T, SidebandAttrChunk>) {
            a.sideband_attrs.push_back(std::move(c));
          } else if constexpr (std::is_same_v<T, SidebandChunk>) {
            a.sideband.push_back(std::move(c));
          } else if constexpr (std::is_same_v<T, ModuleChunk>) {
            a.modules.push_back(std::move(c));
          } else if constexpr (std::is_same_v<T, BlobChunk>) {
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

}  // namespace

Result<Archive> ReadArchive(const std::string& path, const ReadOptions& options) {
  PTSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<ArchiveReader> reader, ArchiveReader::Open(path));
  return Collect(*reader, options);
}

Result<Archive> ReadArchiveFromBytes(std::vector<uint8_t> bytes, std::string name) {
  PTSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<ArchiveReader> reader,
                           ArchiveReader::FromBytes(std::move(bytes), std::move(name)));
  return Collect(*reader, ReadOptions{});
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
