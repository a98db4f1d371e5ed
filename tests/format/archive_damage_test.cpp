// Damaged archives: truncation at every byte offset, a flipped bit at every byte offset, newer
// versions, unknown chunk types, random bytes. Chunk boundaries are found by walking the bytes with
// the layout from FORMAT.md (independently of the reader under test).
#include <doctest/doctest.h>
#include <lz4.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "chunk_codec.h"
#include "crc32c.h"
#include "ptscope/format.h"
#include "test_archives.h"
#include "../support/temp_dir.h"

namespace ptscope::format {
namespace {

uint64_t Le(const std::vector<uint8_t>& b, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{b[at + i]} << (8 * i);
  return v;
}
void PutLe(std::vector<uint8_t>& b, size_t at, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// A small archive: Metadata, lz4-compressed PtData, Sideband, Marker, End.
std::vector<uint8_t> SmallArchive() {
  const ptscope::testing::TempDir dir("ptscope-damage");
  std::string path = dir / "small.ptar";
  auto writer = ArchiveWriter::Create(path);
  REQUIRE(writer);
  std::vector<Chunk> all = testing::EveryChunkType();
  REQUIRE((*writer)->Write(all[0]));
  PtDataChunk pt = std::get<PtDataChunk>(all[1]);
  pt.data = testing::RepetitiveBytes(400);
  REQUIRE((*writer)->Write(pt));
  REQUIRE((*writer)->Write(all[3]));
  REQUIRE((*writer)->Write(all[6]));
  REQUIRE((*writer)->Close());
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
  return bytes;
}

struct Span {
  uint64_t start, stored, end;
};
std::vector<Span> WalkChunks(const std::vector<uint8_t>& b) {
  std::vector<Span> spans;
  for (uint64_t at = 40; at < b.size();) {
    uint64_t stored = Le(b, at + 8, 8);
    uint64_t end = at + 32 + ((stored + 7) & ~uint64_t{7});
    spans.push_back({at, stored, end});
    at = end;
  }
  return spans;
}

std::string HexOffset(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

TEST_CASE("the small archive has the expected shape") {
  std::vector<uint8_t> bytes = SmallArchive();
  std::vector<Span> spans = WalkChunks(bytes);
  REQUIRE(spans.size() == 5);
  CHECK(spans.back().end == bytes.size());
  CHECK((Le(bytes, spans[1].start + 6, 2) & 1) == 1);  // the PT chunk is lz4-compressed
  CHECK(spans[1].stored < 400);
}

TEST_CASE("truncation at every byte offset keeps exactly the complete chunks") {
  const std::vector<uint8_t> bytes = SmallArchive();
  const std::vector<Span> spans = WalkChunks(bytes);
  for (size_t len = 0; len <= bytes.size(); ++len) {
    CAPTURE(len);
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(len));
    auto reader = ArchiveReader::FromBytes(cut, "t");
    if (len < 40) {
      REQUIRE(!reader);
      CHECK(reader.error().code == Errc::kTruncated);
      CHECK(reader.error().message ==
            (len == 0 ? std::string("t: empty file (0 bytes), not an archive")
                      : "t: truncated file header: " + std::to_string(len) +
                            " of 40 bytes at offset 0"));
      continue;
    }
    REQUIRE(reader);
    uint64_t returned = 0;
    while ((*reader)->Next()) ++returned;
    uint64_t complete = 0;
    bool at_boundary = len == 40;
    for (const Span& s : spans) {
      if (s.end <= len) ++complete;
      if (s.end == len) at_boundary = true;
    }
    CHECK(returned == complete);
    CHECK((*reader)->chunks_read() == complete);
    CHECK((*reader)->complete() == (len == bytes.size()));
    if (at_boundary) {
      CHECK((*reader)->damage().empty());
    } else {
      REQUIRE((*reader)->damage().size() == 1);
      const Damage& d = (*reader)->damage().front();
      CHECK(d.code == Errc::kTruncated);
      CHECK(d.chunk_index == complete);
      CHECK(d.offset == spans[complete].start);
      CHECK(d.end == len);
      CHECK(d.reason.rfind("chunk " + std::to_string(complete) + " at offset " +
                               HexOffset(spans[complete].start) + ": truncated ", 0) == 0);
    }
  }
}

Errc ExpectedHeaderFlipError(size_t offset) {
  if (offset < 8) return Errc::kBadMagic;
  if (offset == 12 || offset == 13) return Errc::kUnsupportedVersion;  // min_reader_major
  if (offset == 14 || offset == 15) return Errc::kCorrupt;             // header_size
  return Errc::kChecksum;
}

TEST_CASE("a flipped byte anywhere loses only its chunk, and names the chunk and its range") {
  const std::vector<uint8_t> bytes = SmallArchive();
  const std::vector<Span> spans = WalkChunks(bytes);
  for (size_t offset = 0; offset < bytes.size(); ++offset) {
    CAPTURE(offset);
    std::vector<uint8_t> bad = bytes;
    bad[offset] ^= 0xFF;
    auto reader = ArchiveReader::FromBytes(bad, "f");
    if (offset < 40) {
      REQUIRE(!reader);
      CHECK(reader.error().code == ExpectedHeaderFlipError(offset));
      continue;
    }
    REQUIRE(reader);
    while ((*reader)->Next()) {
    }
    size_t k = 0;
    while (spans[k].end <= offset) ++k;
    uint64_t rel = offset - spans[k].start;
    Errc expected = rel < 4 ? Errc::kCorrupt                           // sync
                    : rel < 32 + spans[k].stored ? Errc::kChecksum  // header or payload
                                                 : Errc::kCorrupt;    // padding
    // Every other chunk is read, the End chunk too unless it is the damaged one.
    const bool end_damaged = k + 1 == spans.size();
    CHECK((*reader)->chunks_read() == spans.size() - 1);
    CHECK((*reader)->complete() == !end_damaged);
    REQUIRE((*reader)->damage().size() == 1);
    const Damage& d = (*reader)->damage().front();
    CHECK(d.code == expected);
    CHECK(d.chunk_index == k);
    CHECK(d.offset == spans[k].start);
    CHECK(d.end == spans[k].end);
    CHECK(d.reason.rfind("chunk " + std::to_string(k) + " at offset " +
                             HexOffset(spans[k].start) + ": ",
                         0) == 0);
  }
}

TEST_CASE("two damaged chunks: both ranges listed, every other chunk read") {
  const std::vector<uint8_t> bytes = SmallArchive();
  const std::vector<Span> spans = WalkChunks(bytes);
  std::vector<uint8_t> bad = bytes;
  bad[spans[1].start + 9] ^= 0x40;   // PT chunk: its stored_size (header checksum)
  bad[spans[3].start + 40] ^= 0x01;  // Marker: its payload
  auto reader = ArchiveReader::FromBytes(bad, "two");
  REQUIRE(reader);
  std::vector<ChunkType> types;
  while (std::optional<Chunk> chunk = (*reader)->Next()) types.push_back(TypeOf(*chunk));
  CHECK(types == std::vector<ChunkType>{ChunkType::kMetadata, ChunkType::kSideband,
                                        ChunkType::kEnd});
  CHECK((*reader)->complete());
  REQUIRE((*reader)->damage().size() == 2);
  const Damage& first = (*reader)->damage()[0];
  CHECK(first.code == Errc::kChecksum);
  CHECK(first.offset == spans[1].start);
  CHECK(first.end == spans[2].start);
  CHECK(first.reason.rfind("chunk 1 at offset " + HexOffset(spans[1].start) +
                               ": chunk header checksum mismatch", 0) == 0);
  const Damage& second = (*reader)->damage()[1];
  CHECK(second.code == Errc::kChecksum);
  CHECK(second.offset == spans[3].start);
  CHECK(second.end == spans[4].start);
  CHECK(second.chunk_index == 2);  // intact chunks before it
}

TEST_CASE("payload checksum damage message names both checksums") {
  std::vector<uint8_t> bytes = SmallArchive();
  std::vector<Span> spans = WalkChunks(bytes);
  uint64_t at = spans[2].start;
  uint32_t stored_crc = static_cast<uint32_t>(Le(bytes, at + 24, 4));
  bytes[at + 32] ^= 0x01;
  uint32_t computed = Crc32c(std::span<const uint8_t>(bytes.data() + at + 32, spans[2].stored));
  auto reader = ArchiveReader::FromBytes(bytes, "f");
  REQUIRE(reader);
  while ((*reader)->Next()) {
  }
  REQUIRE((*reader)->damage().size() == 1);
  char expected[160];
  std::snprintf(expected, sizeof expected,
                "chunk 2 at offset %s: payload checksum mismatch (stored 0x%08x, computed 0x%08x)",
                HexOffset(at).c_str(), stored_crc, computed);
  CHECK((*reader)->damage().front().reason == expected);
}

// Everything a reader yields, as text: each chunk (type, location, encoded payload), the counts,
// completeness, the file size and the damage; or the error that refused the file.
std::string Outcome(Result<std::unique_ptr<ArchiveReader>>& opened) {
  if (!opened) {
    return "error " + std::to_string(static_cast<int>(opened.error().code)) + " " +
           opened.error().message;
  }
  ArchiveReader& r = **opened;
  std::string out;
  while (std::optional<Chunk> chunk = r.Next()) {
    std::vector<uint8_t> payload;
    EncodePayload(*chunk, payload);
    const ChunkLocation& at = r.last_location();
    out += "chunk " + std::to_string(static_cast<int>(TypeOf(*chunk))) + " at " +
           std::to_string(at.offset) + " flags " + std::to_string(at.flags) + " sizes " +
           std::to_string(at.stored_size) + "/" + std::to_string(at.raw_size) + " payload " +
           ToHex(payload) + "\n";
  }
  out += "read " + std::to_string(r.chunks_read()) + " skipped " +
         std::to_string(r.chunks_skipped()) + " complete " + std::to_string(r.complete()) +
         " size " + std::to_string(r.file_size());
  for (const Damage& d : r.damage()) {
    out += " damage " + std::to_string(d.offset) + "-" + std::to_string(d.end) + " " +
           std::to_string(d.chunk_index) + " " + std::to_string(static_cast<int>(d.code)) + " " +
           d.reason;
  }
  return out;
}

// Open() reads the file chunk by chunk; FromBytes() parses memory: the same checks must give the
// same chunks and the same damage, word for word.
TEST_CASE("a file read chunk by chunk gives what its bytes in memory give") {
  const std::vector<uint8_t> bytes = SmallArchive();
  const ptscope::testing::TempDir dir("ptscope-damage");
  const std::string path = dir / "case.ptar";
  auto write = [&](const std::vector<uint8_t>& b) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  };
  auto same = [&](const std::vector<uint8_t>& b) {
    write(b);
    auto from_file = ArchiveReader::Open(path);
    auto from_memory = ArchiveReader::FromBytes(b, path);
    CHECK(Outcome(from_file) == Outcome(from_memory));
  };
  SUBCASE("intact") { same(bytes); }
  SUBCASE("truncated at every byte offset") {
    for (size_t len = 0; len <= bytes.size(); ++len) {
      CAPTURE(len);
      same(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(len)));
    }
  }
  SUBCASE("a flipped byte at every offset") {
    for (size_t offset = 0; offset < bytes.size(); ++offset) {
      CAPTURE(offset);
      std::vector<uint8_t> bad = bytes;
      bad[offset] ^= 0xFF;
      same(bad);
    }
  }
  SUBCASE("the file shrinks after Open") {  // as if cut when it was opened
    for (size_t len = 40; len <= bytes.size(); ++len) {
      CAPTURE(len);
      write(bytes);
      auto from_file = ArchiveReader::Open(path);
      REQUIRE(from_file);
      REQUIRE(::truncate(path.c_str(), static_cast<off_t>(len)) == 0);
      std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(len));
      auto from_memory = ArchiveReader::FromBytes(cut, path);
      CHECK(Outcome(from_file) == Outcome(from_memory));
    }
  }
}

std::vector<uint8_t> Header(uint16_t major, uint16_t minor, uint16_t min_reader,
                            uint16_t header_size) {
  std::vector<uint8_t> h(header_size, 0);
  const uint8_t magic[8] = {'P', 'T', 'A', 'R', '\r', '\n', 0x1a, '\n'};
  std::copy(magic, magic + 8, h.begin());
  PutLe(h, 8, major, 2);
  PutLe(h, 10, minor, 2);
  PutLe(h, 12, min_reader, 2);
  PutLe(h, 14, header_size, 2);
  PutLe(h, 32, Crc32c(h), 4);
  return h;
}

void AppendChunk(std::vector<uint8_t>& out, uint16_t type, std::vector<uint8_t> payload) {
  std::vector<uint8_t> c(32, 0);
  PutLe(c, 0, 0x4B435450, 4);
  PutLe(c, 4, type, 2);
  PutLe(c, 8, payload.size(), 8);
  PutLe(c, 16, payload.size(), 8);
  PutLe(c, 24, Crc32c(payload), 4);
  PutLe(c, 28, Crc32c(std::span<const uint8_t>(c.data(), 28)), 4);
  c.insert(c.end(), payload.begin(), payload.end());
  c.resize((c.size() + 7) & ~size_t{7}, 0);
  out.insert(out.end(), c.begin(), c.end());
}

TEST_CASE("resync finds the next chunk wherever it lies in the scan's read windows") {
  // A chunk whose header is damaged, with 1 MiB of payload: the next chunk is looked for from
  // 8 bytes after the bad header, read 1 MiB at a time; put it around the first window's end.
  for (int64_t delta : {-16, -8, 0, 8, 16, 24}) {
    CAPTURE(delta);
    std::vector<uint8_t> bytes = Header(1, 0, 1, 40);
    const uint64_t next_at = 48 + (uint64_t{1} << 20) + delta;
    AppendChunk(bytes, 6, testing::NoiseBytes(next_at - 40 - 32, 3));
    AppendChunk(bytes, 7, std::vector<uint8_t>(40, 0));
    REQUIRE(bytes.size() == next_at + 72);
    bytes[40] ^= 0xff;  // the first chunk's sync
    auto reader = ArchiveReader::FromBytes(bytes, "w");
    REQUIRE(reader);
    std::optional<Chunk> marker = (*reader)->Next();
    REQUIRE(marker);
    CHECK(std::holds_alternative<MarkerChunk>(*marker));
    CHECK((*reader)->last_location().offset == next_at);
    REQUIRE((*reader)->damage().size() == 1);
    CHECK((*reader)->damage()[0].end == next_at);
  }
}

TEST_CASE("an archive for a newer major version is refused naming both versions") {
  auto r = ArchiveReader::FromBytes(Header(2, 0, 2, 40), "new.ptar");
  REQUIRE(!r);
  CHECK(r.error().code == Errc::kUnsupportedVersion);
  CHECK(r.error().message ==
        "new.ptar: archive needs reader version 2, this is version 1: upgrade ptscope");
}

TEST_CASE("newer versions a version-1 reader may read: bigger header, unknown chunk types") {
  std::vector<uint8_t> bytes = Header(2, 3, 1, 48);
  AppendChunk(bytes, 9, {'h', 'e', 'l', 'l', 'o'});
  AppendChunk(bytes, 7, std::vector<uint8_t>(40, 0));  // Marker with all-zero fields
  AppendChunk(bytes, 15, {2, 0, 0, 0, 0, 0, 0, 0});    // End: two chunks precede it
  auto reader = ArchiveReader::FromBytes(bytes, "n");
  REQUIRE(reader);
  CHECK((*reader)->header().version_major == 2);
  CHECK((*reader)->header().version_minor == 3);
  std::optional<Chunk> marker = (*reader)->Next();
  REQUIRE(marker);
  CHECK(std::holds_alternative<MarkerChunk>(*marker));
  CHECK((*reader)->last_location().offset == 48 + 40);
  REQUIRE((*reader)->Next());
  CHECK(!(*reader)->Next());
  CHECK((*reader)->complete());
  CHECK((*reader)->damage().empty());
  CHECK((*reader)->chunks_read() == 3);
  CHECK((*reader)->chunks_skipped() == 1);
  CHECK((*reader)->damage().empty());
}

TEST_CASE("fields appended by a newer minor version are ignored") {
  std::vector<uint8_t> bytes = Header(1, 1, 1, 40);
  std::vector<uint8_t> marker(32, 0);
  marker[0] = 5;                                          // kind: trigger
  marker[16] = 0x2a;                                      // tsc
  for (int b : {2, 0, 0, 0, int{'h'}, int{'i'}}) marker.push_back(static_cast<uint8_t>(b));  // "hi"
  for (int i = 0; i < 12; ++i) marker.push_back(0xee);   // a field this reader does not know
  AppendChunk(bytes, 7, marker);
  auto reader = ArchiveReader::FromBytes(bytes, "m");
  REQUIRE(reader);
  std::optional<Chunk> chunk = (*reader)->Next();
  REQUIRE(chunk);
  const auto& m = std::get<MarkerChunk>(*chunk);
  CHECK(m.kind == MarkerKind::kTrigger);
  CHECK(m.tsc == 0x2a);
  CHECK(m.text == "hi");
  CHECK(!(*reader)->Next());
  CHECK((*reader)->damage().empty());
}

TEST_CASE("ToHex and FromHex") {
  CHECK(ToHex({0x00, 0xab, 0x7f}) == "00ab7f");
  CHECK(ToHex({}) == "");
  CHECK(FromHex("00AB7f") == std::optional<std::vector<uint8_t>>({0x00, 0xab, 0x7f}));
  CHECK(!FromHex("abc"));
  CHECK(!FromHex("zz"));
  CHECK(std::string(ErrcName(Errc::kChecksum)) == "checksum");
  CHECK(std::string(ChunkTypeName(ChunkType::kPtData)) == "PtData");
  CHECK(std::string(BlobKindName(static_cast<BlobKind>(99))) == "unknown");
}

TEST_CASE("an End chunk with the wrong count and data after End are damage") {
  std::vector<uint8_t> bytes = Header(1, 0, 1, 40);
  AppendChunk(bytes, 15, {5, 0, 0, 0, 0, 0, 0, 0});
  auto reader = ArchiveReader::FromBytes(bytes, "e");
  REQUIRE(reader);
  CHECK(!(*reader)->Next());
  CHECK(!(*reader)->complete());
  REQUIRE((*reader)->damage().size() == 1);
  CHECK((*reader)->damage()[0].reason ==
        "chunk 0 at offset 0x28: End chunk field 'chunk_count' = 5 but 0 chunks precede it");
  CHECK((*reader)->damage()[0].end == bytes.size());

  std::vector<uint8_t> after = Header(1, 0, 1, 40);
  AppendChunk(after, 15, std::vector<uint8_t>(8, 0));
  AppendChunk(after, 7, std::vector<uint8_t>(40, 0));
  auto reader2 = ArchiveReader::FromBytes(after, "e");
  REQUIRE(reader2);
  REQUIRE((*reader2)->Next());
  CHECK(!(*reader2)->Next());
  CHECK((*reader2)->complete());
  REQUIRE((*reader2)->damage().size() == 1);
  CHECK((*reader2)->damage()[0].reason == "chunk 1 at offset 0x50: 72 bytes after the End chunk");
  CHECK((*reader2)->damage()[0].end == after.size());
}

TEST_CASE("after damage the End chunk's count cannot be checked: the archive is complete") {
  std::vector<uint8_t> bytes = Header(1, 0, 1, 40);
  AppendChunk(bytes, 7, std::vector<uint8_t>(40, 0));
  AppendChunk(bytes, 7, std::vector<uint8_t>(40, 0));
  AppendChunk(bytes, 15, {2, 0, 0, 0, 0, 0, 0, 0});
  bytes[40 + 72 + 32 + 3] ^= 1;  // the second marker's payload
  auto reader = ArchiveReader::FromBytes(bytes, "e");
  REQUIRE(reader);
  REQUIRE((*reader)->Next());
  REQUIRE((*reader)->Next());  // the End chunk
  CHECK(!(*reader)->Next());
  CHECK((*reader)->complete());
  CHECK((*reader)->chunks_read() == 2);
  REQUIRE((*reader)->damage().size() == 1);
  CHECK((*reader)->damage()[0].offset == 40 + 72);
  CHECK((*reader)->damage()[0].end == 40 + 2 * 72);
}

TEST_CASE("impossible sizes inside an intact chunk are refused before allocating") {
  std::vector<uint8_t> bytes = Header(1, 0, 1, 40);
  // A Blob whose 'data' length claims 2^62 bytes.
  std::vector<uint8_t> blob(16 + 4 + 4, 0);
  blob[0] = 6;
  std::vector<uint8_t> len(8, 0);
  PutLe(len, 0, uint64_t{1} << 62, 8);
  blob.insert(blob.end(), len.begin(), len.end());
  AppendChunk(bytes, 6, blob);
  auto reader = ArchiveReader::FromBytes(bytes, "s");
  REQUIRE(reader);
  CHECK(!(*reader)->Next());
  REQUIRE((*reader)->damage().size() == 1);
  CHECK((*reader)->damage()[0].code == Errc::kCorrupt);
  CHECK((*reader)->damage()[0].reason ==
        "chunk 0 at offset 0x28: Blob payload: field 'data' at offset 32 needs 4611686018427387904 "
        "bytes, 0 left");
}

TEST_CASE("a raw_size above 1 GiB is refused") {
  std::vector<uint8_t> bytes = Header(1, 0, 1, 40);
  AppendChunk(bytes, 2, std::vector<uint8_t>(8, 0));
  PutLe(bytes, 40 + 6, 1, 2);                                      // lz4
  PutLe(bytes, 40 + 16, (uint64_t{1} << 30) + 1, 8);               // raw_size
  PutLe(bytes, 40 + 28, Crc32c(std::span<const uint8_t>(bytes.data() + 40, 28)), 4);
  auto reader = ArchiveReader::FromBytes(bytes, "s");
  REQUIRE(reader);
  CHECK(!(*reader)->Next());
  REQUIRE((*reader)->damage().size() == 1);
  CHECK((*reader)->damage()[0].reason ==
        "chunk 0 at offset 0x28: field 'raw_size' = 1073741825 exceeds the 1 GiB chunk limit");
}

TEST_CASE("an lz4 chunk claiming more than 255 times its stored size is refused unread") {
  // 104 stored bytes claiming 1 GiB once cost 1.1 GB before the payload was looked at.
  std::vector<uint8_t> bytes = Header(1, 0, 1, 40);
  AppendChunk(bytes, 6, std::vector<uint8_t>(104, 0));
  PutLe(bytes, 40 + 6, 1, 2);                                      // lz4
  auto claim = [&](uint64_t raw) {
    PutLe(bytes, 40 + 16, raw, 8);
    PutLe(bytes, 40 + 28, Crc32c(std::span<const uint8_t>(bytes.data() + 40, 28)), 4);
    auto reader = ArchiveReader::FromBytes(bytes, "z");
    REQUIRE(reader);
    CHECK(!(*reader)->Next());
    REQUIRE((*reader)->damage().size() == 1);
    return (*reader)->damage()[0].reason;
  };
  CHECK(claim(uint64_t{1} << 30) ==
        "chunk 0 at offset 0x28: field 'raw_size' = 1073741824 is more than an lz4 payload of "
        "'stored_size' = 104 bytes can hold (at most 255 times as much)");
  CHECK(claim(104 * 255 + 1) ==
        "chunk 0 at offset 0x28: field 'raw_size' = 26521 is more than an lz4 payload of "
        "'stored_size' = 104 bytes can hold (at most 255 times as much)");
  // Within the bound the payload itself is looked at (and these zeros are no lz4 block).
  CHECK(claim(104 * 255) ==
        "chunk 0 at offset 0x28: lz4 payload does not decompress to 'raw_size' = 26520 bytes");
}

TEST_CASE("a PtData payload that does not decompress: damage when read whole, an error where "
          "its skipped bytes are read") {
  // EveryChunkType's PtData fields (stream 7, tid 1235, offset 4096, ...) and 400 bytes,
  // compressed, without the block's last 8 bytes (and checksums over what is stored): the
  // fields decompress, the whole does not. Only a writer could make this (damage in transit
  // fails the checksum).
  PtDataChunk pt = std::get<PtDataChunk>(testing::EveryChunkType()[1]);
  pt.data = testing::RepetitiveBytes(400);
  std::vector<uint8_t> raw;
  EncodePayload(Chunk(pt), raw);
  REQUIRE(raw.size() == kPtDataFieldBytes + 400);
  std::vector<char> packed(static_cast<size_t>(LZ4_compressBound(static_cast<int>(raw.size()))));
  const int packed_size = LZ4_compress_default(reinterpret_cast<const char*>(raw.data()),
                                               packed.data(), static_cast<int>(raw.size()),
                                               static_cast<int>(packed.size()));
  REQUIRE(packed_size > 8);
  std::vector<uint8_t> bytes = Header(1, 0, 1, 40);
  AppendChunk(bytes, 2, std::vector<uint8_t>(packed.begin(), packed.begin() + packed_size - 8));
  PutLe(bytes, 40 + 6, 1, 2);                                      // lz4
  PutLe(bytes, 40 + 16, raw.size(), 8);                            // raw_size
  PutLe(bytes, 40 + 28, Crc32c(std::span<const uint8_t>(bytes.data() + 40, 28)), 4);
  const std::string damage =
      "chunk at offset 0x28: lz4 payload does not decompress to 'raw_size' = 456 bytes";
  {
    auto whole = ArchiveReader::FromBytes(bytes, "w");
    REQUIRE(whole);
    CHECK(!(*whole)->Next());
    REQUIRE((*whole)->damage().size() == 1);
    CHECK((*whole)->damage()[0].reason == "chunk 0 at offset 0x28: lz4 payload does not "
                                          "decompress to 'raw_size' = 456 bytes");
  }
  auto skipped = ArchiveReader::FromBytes(bytes, "s");
  REQUIRE(skipped);
  (*skipped)->SkipData(true, false);
  std::optional<Chunk> chunk = (*skipped)->Next();
  REQUIRE(chunk);
  const PtDataChunk* fields = std::get_if<PtDataChunk>(&*chunk);
  REQUIRE(fields != nullptr);
  CHECK(fields->stream_id == 7);
  CHECK(fields->tid == 1235);
  CHECK(fields->stream_offset == 4096);
  CHECK(fields->data.empty());
  CHECK((*skipped)->last_location().data_size == 400);
  CHECK((*skipped)->damage().empty());
  Result<Chunk> again = (*skipped)->ReadChunkAt(40);
  REQUIRE(!again);
  CHECK(again.error().message == "s: " + damage);
}

TEST_CASE("random bytes are not an archive; a valid header with random chunks is damage") {
  auto r = ArchiveReader::FromBytes(testing::NoiseBytes(1000, 77), "r");
  REQUIRE(!r);
  CHECK(r.error().code == Errc::kBadMagic);
  std::vector<uint8_t> bytes = Header(1, 0, 1, 40);
  std::vector<uint8_t> noise = testing::NoiseBytes(1000, 78);
  bytes.insert(bytes.end(), noise.begin(), noise.end());
  auto reader = ArchiveReader::FromBytes(bytes, "r");
  REQUIRE(reader);
  CHECK(!(*reader)->Next());
  REQUIRE((*reader)->damage().size() == 1);
  CHECK((*reader)->damage()[0].offset == 40);
  CHECK((*reader)->damage()[0].end == bytes.size());
  CHECK((*reader)->damage()[0].reason.rfind("chunk 0 at offset 0x28: bad chunk sync 0x", 0) == 0);
}

TEST_CASE("a text-mode transfer is recognised from the magic") {
  std::vector<uint8_t> bytes = Header(1, 0, 1, 40);
  bytes.erase(bytes.begin() + 4);  // CR LF -> LF
  auto r = ArchiveReader::FromBytes(bytes, "m");
  REQUIRE(!r);
  CHECK(r.error().code == Errc::kBadMagic);
  CHECK(r.error().message ==
        "m: bad magic at offset 0: the line-ending bytes were altered (the archive was "
        "transferred in text mode; copy it again in binary mode)");
}

}  // namespace
}  // namespace ptscope::format
