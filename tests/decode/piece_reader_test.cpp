// PT read again chunk by chunk (decode/src/capture/piece_reader.h): the units of a piece cut window by
// window are those of the original whole-piece split, with their bytes; every byte range reads
// back as written; and a file that changed under the decoder is an error naming it (or, for the
// unit planner, a unit that says so after the units before the damage), never wrong bytes.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include "decode_core_pt_builder.h"
#include "capture/piece_reader.h"
#include "parallel/psb_units.h"
#include "parallel/unit_cursor.h"
#include "ptscope/format.h"
#include "capture/sideband_timeline.h"
#include "capture/streams.h"
#include "parallel/unit_planner.h"

namespace ptscope::decode {
namespace {

// The whole-piece split as it was written before windows (the reference): walks the PSB chain
// with FindPsb and reads the candidates' PSB+ headers with ReadPsbState.
std::vector<DecodeUnitSpan> ReferenceSplit(const std::vector<uint8_t>& piece,
                                           const pt_config& config, size_t target) {
  const uint8_t* bytes = piece.data();
  const size_t size = piece.size();
  std::vector<DecodeUnitSpan> units;
  size_t psb = FindPsb(bytes, size, 0);
  while (psb < size) {
    DecodeUnitSpan unit;
    unit.begin = psb;
    unit.start = ReadPsbState(bytes, size, config, psb);
    if (!unit.start.valid) {
      psb = FindPsb(bytes, size, psb + 16);
      continue;
    }
    size_t next = FindPsb(bytes, size, psb + 16);
    while (next < size &&
           (next - unit.begin < target || !ReadPsbState(bytes, size, config, next).valid)) {
      next = FindPsb(bytes, size, next + 16);
    }
    unit.end = unit.decode_end = next;
    if (next < size) {
      size_t header_end = ReadPsbState(bytes, size, config, next).header_end;
      if (header_end > next) unit.decode_end = header_end;
    }
    units.push_back(unit);
    psb = next;
  }
  return units;
}

// PSB+ headers, packets, noise (which holds 02 and 82 bytes), runs of 02 82 longer than a PSB,
// and a truncated header at the end.
std::vector<uint8_t> MixedPt(uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<uint8_t> out;
  for (int segment = 0; segment < 60; ++segment) {
    testing::PtBuilder pt;
    switch (random() % 4) {
      case 0: pt.Psb(1000 + segment, 0x401000 + segment * 16); break;
      case 1: pt.Psb(2000 + segment, 0); break;
      case 2: pt.Raw(std::vector<uint8_t>(2 * (8 + random() % 12), 0x02)); break;
      default: break;
    }
    std::vector<uint8_t> bytes = pt.bytes();
    if (bytes.size() > 0 && bytes[0] == 0x02 && bytes.size() >= 16 && bytes[1] == 0x02) {
      for (size_t i = 1; i < bytes.size(); i += 2) bytes[i] = 0x82;  // the 02 82 run
    }
    out.insert(out.end(), bytes.begin(), bytes.end());
    size_t noise = random() % 900;
    for (size_t i = 0; i < noise; ++i) {
      uint32_t r = random() % 8;
      out.push_back(r == 0 ? 0x02 : r == 1 ? 0x82 : static_cast<uint8_t>(random()));
    }
  }
  testing::PtBuilder tail;
  tail.Psb(9999, 0x402000);
  std::vector<uint8_t> cut = tail.bytes();
  out.insert(out.end(), cut.begin(), cut.begin() + cut.size() / 2);
  return out;
}

// MixedPt of consecutive seeds from `first_seed`, joined, until they hold `min_size` bytes (each
// ends in a truncated PSB+ header, so the joins are damage too).
std::vector<uint8_t> ManyMixedPt(uint32_t first_seed, size_t min_size) {
  std::vector<uint8_t> bytes;
  for (uint32_t seed = first_seed; bytes.size() < min_size; ++seed) {
    std::vector<uint8_t> more = MixedPt(seed);
    bytes.insert(bytes.end(), more.begin(), more.end());
  }
  return bytes;
}

struct TempArchive {
  std::string dir, path;
  TempArchive() {
    char tmpl[] = "/tmp/ptscope-piece-XXXXXX";
    dir = mkdtemp(tmpl);
    path = dir + "/pt.ptar";
  }
  ~TempArchive() {
    std::remove(path.c_str());
    rmdir(dir.c_str());
  }
};

// Writes `bytes` as PT chunks of random sizes (1..max_chunk) and returns the piece that refers
// to them, as CollectStreams builds it from a ReadArchive without PT bytes.
Piece WriteChunked(const std::string& path, const std::vector<uint8_t>& bytes, size_t max_chunk,
                   uint32_t seed) {
  std::mt19937 random(seed);
  auto writer = format::ArchiveWriter::Create(path);
  REQUIRE(writer);
  for (size_t at = 0; at < bytes.size();) {
    size_t n = std::min<size_t>(bytes.size() - at, 1 + random() % max_chunk);
    format::PtDataChunk chunk;
    chunk.stream_id = 1;
    chunk.tid = 5;
    chunk.stream_offset = at;
    chunk.data.assign(bytes.begin() + at, bytes.begin() + at + n);
    REQUIRE((*writer)->Write(chunk));
    at += n;
  }
  REQUIRE((*writer)->Close());
  auto archive = format::ReadArchive(path, format::ReadOptions{.keep_pt_bytes = false});
  REQUIRE(archive);
  Piece piece;
  for (const format::Archive::PtDataRef& ref : archive->pt_refs) {
    piece.chunks.push_back(Piece::ChunkRef{piece.size, ref.size, ref.chunk_offset});
    piece.size += ref.size;
  }
  return piece;
}

// Zeros over the last quarter of the file: the chunks there no longer read (checksums). Returns
// where the zeros start.
uint64_t DamageLastQuarter(const std::string& path) {
  struct stat st;
  REQUIRE(stat(path.c_str(), &st) == 0);
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f != nullptr);
  REQUIRE(std::fseek(f, st.st_size / 4 * 3, SEEK_SET) == 0);
  std::vector<char> zeros(static_cast<size_t>(st.st_size - st.st_size / 4 * 3), 0);
  REQUIRE(std::fwrite(zeros.data(), 1, zeros.size(), f) == zeros.size());
  std::fclose(f);
  return static_cast<uint64_t>(st.st_size / 4 * 3);
}

// The piece offset where the chunk holding file offset `damage` starts: what reads before it.
size_t ReadableEnd(const Piece& piece, uint64_t damage) {
  size_t end = 0;
  for (const Piece::ChunkRef& chunk : piece.chunks) {
    if (chunk.chunk_offset <= damage) end = chunk.piece_offset;
  }
  return end;
}

bool SameUnits(const std::vector<DecodeUnitSpan>& a, const std::vector<DecodeUnitSpan>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].begin != b[i].begin || a[i].end != b[i].end || a[i].decode_end != b[i].decode_end ||
        a[i].start.valid != b[i].start.valid || a[i].start.tsc != b[i].start.tsc ||
        a[i].start.ip != b[i].start.ip || a[i].start.has_ip != b[i].start.has_ip ||
        a[i].start.header_end != b[i].start.header_end) {
      return false;
    }
  }
  return true;
}

// The units of `piece` (whose bytes are `bytes`) cut by a PieceUnitCursor, each unit's bytes
// checked against the piece's.
std::vector<DecodeUnitSpan> CutAll(PieceReader& reader, const Piece& piece,
                                   const std::vector<uint8_t>& bytes, const pt_config& config,
                                   size_t target) {
  PieceUnitCursor cursor(reader, piece, config, target);
  std::vector<DecodeUnitSpan> units;
  for (;;) {
    auto unit = cursor.Next();
    REQUIRE(unit);
    if (!*unit) break;
    units.push_back(**unit);
    CHECK(cursor.scanned() >= units.back().end);  // the unit's end was found, not guessed
    std::span<const uint8_t> got = cursor.Bytes(**unit);
    REQUIRE(got.size() == (*unit)->decode_end - (*unit)->begin);
    CHECK(std::equal(got.begin(), got.end(), bytes.begin() + (*unit)->begin));
  }
  auto after = cursor.Next();  // the end stays the end
  REQUIRE(after);
  CHECK(!*after);
  return units;
}

TEST_CASE("a piece split window by window has the units and bytes of the whole-piece split") {
  pt_config config;
  pt_config_init(&config);
  TempArchive file;
  size_t checked_units = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    std::vector<uint8_t> bytes = MixedPt(seed);
    // Chunks from a few bytes (PSBs and headers span several) to larger than the piece.
    for (size_t max_chunk : {7, 40, 1000, 100000}) {
      Piece piece = WriteChunked(file.path, bytes, max_chunk, seed * 31 + max_chunk);
      REQUIRE(piece.size == bytes.size());
      for (size_t target : {1, 300, 4096}) {
        std::vector<DecodeUnitSpan> reference = ReferenceSplit(bytes, config, target);
        PieceReader reader(file.path);
        CAPTURE(seed);
        CAPTURE(max_chunk);
        CAPTURE(target);
        CHECK(SameUnits(CutAll(reader, piece, bytes, config, target), reference));
        checked_units += reference.size();
      }
    }
  }
  CHECK(checked_units > 1000);
}

TEST_CASE("a piece in memory cut unit by unit has the units and bytes of the whole-piece split") {
  // Larger than the cursor's step through a piece in memory, so that units straddle its steps.
  std::vector<uint8_t> bytes = ManyMixedPt(100, 1500000);
  std::vector<uint8_t> held = bytes;
  Piece piece;
  piece.bytes = PieceBytes::Join({&held});
  piece.size = bytes.size();
  REQUIRE(piece.in_memory());
  pt_config config;
  pt_config_init(&config);
  PieceReader reader("/nonexistent/never-read.ptar");
  for (size_t target : {1, 4096, 200000}) {
    CAPTURE(target);
    std::vector<DecodeUnitSpan> reference = ReferenceSplit(bytes, config, target);
    REQUIRE(reference.size() > (target == 200000 ? 5u : 300u));
    CHECK(SameUnits(CutAll(reader, piece, bytes, config, target), reference));
  }
}

TEST_CASE("a cursor over a damaged file yields the units before the damage, then an error") {
  TempArchive file;
  std::vector<uint8_t> bytes = ManyMixedPt(40, 800000);
  Piece piece = WriteChunked(file.path, bytes, 2000, 9);
  pt_config config;
  pt_config_init(&config);
  // The cursor reads ahead of the units it hands out; what it read before the damage still comes
  // out, as the units of a piece that ends there.
  const size_t readable = ReadableEnd(piece, DamageLastQuarter(file.path));
  REQUIRE(readable > bytes.size() / 2);
  const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + readable);
  std::vector<DecodeUnitSpan> reference = ReferenceSplit(prefix, config, 300);
  PieceReader reader(file.path);
  PieceUnitCursor cursor(reader, piece, config, 300);
  std::vector<DecodeUnitSpan> units;
  for (;;) {
    auto unit = cursor.Next();
    if (!unit) {
      CHECK(unit.error().message.find(file.path) == 0);
      CHECK(unit.error().message.find("checksum") != std::string::npos);
      break;
    }
    REQUIRE(*unit);  // the piece cannot end normally: its last chunks are gone
    units.push_back(**unit);
    std::span<const uint8_t> got = cursor.Bytes(**unit);
    CHECK(std::equal(got.begin(), got.end(), bytes.begin() + (*unit)->begin,
                     bytes.begin() + (*unit)->decode_end));
  }
  CHECK(SameUnits(units, reference));
  CHECK(units.back().end == readable);
  auto after = cursor.Next();  // no more units, and no second error
  REQUIRE(after);
  CHECK(!*after);
}

TEST_CASE("the planner hands out a piece it cannot read to the end: its units, then the failure") {
  TempArchive file;
  std::vector<uint8_t> bytes = ManyMixedPt(60, 800000);
  std::vector<Stream> streams(1);
  streams[0].key = ThreadKey{5, 5};
  streams[0].pieces.push_back(WriteChunked(file.path, bytes, 3000, 4));
  const size_t readable = ReadableEnd(streams[0].pieces[0], DamageLastQuarter(file.path));
  DecoderSetup setup;
  pt_config config;
  pt_config_init(&config);
  UnitPlanner planner(streams, setup, config, 300, file.path, 0, UINT64_MAX);
  std::vector<WorkUnit> units(1);
  while (planner.Next(&units.back())) units.emplace_back();
  units.pop_back();
  REQUIRE(units.size() > 2);
  const WorkUnit& failure = units.back();
  CHECK(failure.unreadable.find("cannot read the trace: " + file.path) == 0);
  CHECK(failure.unreadable.find("checksum") != std::string::npos);
  CHECK(failure.bytes.empty());
  CHECK(failure.piece == 0);
  CHECK(failure.unit == units.size() - 1);  // it follows the last unit read
  for (size_t i = 0; i + 1 < units.size(); ++i) {
    CAPTURE(i);
    CHECK(units[i].unreadable.empty());
    CHECK(units[i].unit == i);
    CHECK(units[i].bytes.size() == units[i].span.decode_end - units[i].span.begin);
    CHECK(std::equal(units[i].bytes.begin(), units[i].bytes.end(),
                     bytes.begin() + units[i].span.begin));
  }
  CHECK(!units[units.size() - 2].has_next);  // the piece ends where it could not be read
  CHECK(units[units.size() - 2].span.end == readable);
  CHECK(planner.planned(0));
  CHECK(streams[0].pieces[0].has_psb);
}

TEST_CASE("PieceReader hands out every byte range as written, across chunks") {
  TempArchive file;
  std::vector<uint8_t> bytes = MixedPt(99);
  Piece piece = WriteChunked(file.path, bytes, 500, 5);
  REQUIRE(piece.chunks.size() > 20);
  PieceReader reader(file.path);
  std::mt19937 random(3);
  for (int i = 0; i < 2000; ++i) {
    size_t begin = random() % bytes.size();
    size_t end = begin + random() % std::min<size_t>(bytes.size() - begin + 1, 3000);
    auto got = reader.Bytes(piece, begin, end);
    REQUIRE(got);
    REQUIRE(got->size() == end - begin);
    CHECK(std::equal(got->begin(), got->end(), bytes.begin() + begin));
  }
  auto all = reader.Bytes(piece, 0, piece.size);
  REQUIRE(all);
  CHECK(std::equal(all->begin(), all->end(), bytes.begin(), bytes.end()));
}

TEST_CASE("a PT file that changed since it was read is an error naming it, not other bytes") {
  TempArchive file;
  std::vector<uint8_t> bytes = MixedPt(7);
  Piece piece = WriteChunked(file.path, bytes, 800, 1);
  // The same bytes in other chunk sizes: chunks start at other offsets now.
  WriteChunked(file.path, bytes, 300, 2);
  PieceReader reader(file.path);
  bool any_error = false;
  for (size_t begin = 0; begin < bytes.size(); begin += 997) {
    auto got = reader.Bytes(piece, begin, std::min(bytes.size(), begin + 64));
    if (got) {
      CHECK(std::equal(got->begin(), got->end(), bytes.begin() + begin));  // a chunk that fits
      continue;
    }
    any_error = true;
    CHECK(got.error().message.find(file.path) == 0);
    CHECK(got.error().message.find("offset") != std::string::npos);
  }
  CHECK(any_error);
  std::remove(file.path.c_str());
  PieceReader gone(file.path);
  auto missing = gone.Bytes(piece, 0, 10);
  REQUIRE(!missing);
  CHECK(missing.error().message.find(file.path) != std::string::npos);
}

TEST_CASE("pieces read by reference are cut only where data was lost, as pieces in memory are") {
  // Chunks: 600 bytes, an empty one (no data, nothing lost), 900 bytes, then 500 bytes after a
  // lost stretch. Read with and without the PT bytes: the same pieces, the same bytes.
  TempArchive file;
  std::vector<uint8_t> bytes = MixedPt(3);
  REQUIRE(bytes.size() > 2000);
  {
    auto writer = format::ArchiveWriter::Create(file.path);
    REQUIRE(writer);
    const std::vector<std::pair<size_t, size_t>> spans = {{0, 600}, {600, 600}, {600, 1500},
                                                          {1500, 2000}};
    for (size_t i = 0; i < spans.size(); ++i) {
      format::PtDataChunk chunk;
      chunk.stream_id = 1;
      chunk.tid = 5;
      chunk.stream_offset = spans[i].first + (i == 3 ? 100 : 0);  // 100 bytes lost before it
      chunk.data.assign(bytes.begin() + spans[i].first, bytes.begin() + spans[i].second);
      REQUIRE((*writer)->Write(chunk));
    }
    REQUIRE((*writer)->Close());
  }
  auto whole = format::ReadArchive(file.path);
  auto light = format::ReadArchive(file.path, format::ReadOptions{.keep_pt_bytes = false});
  REQUIRE(whole);
  REQUIRE(light);
  std::vector<Stream> in_memory = CollectStreams(*whole, SidebandTimeline::Build(*whole));
  std::vector<Stream> by_reference = CollectStreams(*light, SidebandTimeline::Build(*light));
  REQUIRE(in_memory.size() == 1);
  REQUIRE(by_reference.size() == 1);
  const std::vector<Piece>& a = in_memory[0].pieces;
  const std::vector<Piece>& b = by_reference[0].pieces;
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  PieceReader reader(file.path);
  for (size_t p = 0; p < 2; ++p) {
    CHECK(a[p].in_memory());
    CHECK(!b[p].in_memory());
    CHECK(a[p].size == (p == 0 ? 1500u : 500u));
    CHECK(b[p].size == a[p].size);
    CHECK(b[p].loss_before == a[p].loss_before);
    auto got = reader.Bytes(b[p], 0, b[p].size);
    REQUIRE(got);
    CHECK(std::equal(got->begin(), got->end(), a[p].bytes.data(), a[p].bytes.data() + a[p].size));
  }
  CHECK(b[0].chunks.size() == 2);  // the empty chunk is not one to read
  CHECK(b[1].loss_before.find("100 bytes of trace lost") == 0);
}

TEST_CASE("snapshots that overlap or continue one another are one piece, each byte once; a ring "
          "that went round between them is a cut (issue 23 defect 5)") {
  // Snapshot 0 holds [0, 1200); snapshot 1, a ring copied whole again (pt-emulate), [400, 1800);
  // snapshot 2 only what was new since (pt-record), [1800, 2000); snapshot 3 a ring that went
  // round since (overwritten, starting where snapshot 2 ended), [2000, 2300).
  TempArchive file;
  std::vector<uint8_t> bytes = ManyMixedPt(3, 2300);
  {
    auto writer = format::ArchiveWriter::Create(file.path);
    REQUIRE(writer);
    struct Span {
      size_t from, to;
      uint32_t flags;
    };
    const std::vector<Span> spans = {{0, 1200, format::kPtSnapshot},
                                     {400, 1800, format::kPtSnapshot | format::kPtOverwritten},
                                     {1800, 2000, format::kPtSnapshot},
                                     {2000, 2300, format::kPtSnapshot | format::kPtOverwritten}};
    for (size_t i = 0; i < spans.size(); ++i) {
      format::PtDataChunk chunk;
      chunk.stream_id = 1;
      chunk.tid = 5;
      chunk.stream_offset = spans[i].from;
      chunk.flags = spans[i].flags;
      chunk.snapshot_index = static_cast<uint32_t>(i);
      chunk.data.assign(bytes.begin() + spans[i].from, bytes.begin() + spans[i].to);
      REQUIRE((*writer)->Write(chunk));
    }
    REQUIRE((*writer)->Close());
  }
  auto whole = format::ReadArchive(file.path);
  auto light = format::ReadArchive(file.path, format::ReadOptions{.keep_pt_bytes = false});
  REQUIRE(whole);
  REQUIRE(light);
  std::vector<Stream> in_memory = CollectStreams(*whole, SidebandTimeline::Build(*whole));
  std::vector<Stream> by_reference = CollectStreams(*light, SidebandTimeline::Build(*light));
  REQUIRE(in_memory.size() == 1);
  REQUIRE(by_reference.size() == 1);
  PieceReader reader(file.path);
  for (const std::vector<Piece>* pieces : {&in_memory[0].pieces, &by_reference[0].pieces}) {
    REQUIRE(pieces->size() == 2);
    const Piece& first = (*pieces)[0];
    const Piece& second = (*pieces)[1];
    CHECK(first.loss_before.empty());
    CHECK(second.loss_before ==
          "snapshot 3 begins: execution between snapshots was not captured");
    auto a = reader.Bytes(first, 0, first.size);  // (the span lives until the next read)
    REQUIRE(a);
    CHECK(std::vector<uint8_t>(a->begin(), a->end()) ==
          std::vector<uint8_t>(bytes.begin(), bytes.begin() + 2000));
    auto b = reader.Bytes(second, 0, second.size);
    REQUIRE(b);
    CHECK(std::vector<uint8_t>(b->begin(), b->end()) ==
          std::vector<uint8_t>(bytes.begin() + 2000, bytes.begin() + 2300));
  }
}

TEST_CASE("raw trace bytes in a file (perf.data) are read in 1 MiB chunks, as written") {
  // A perf.data-like file: 100 bytes of something else, 2.5 MiB of PT (one AUXTRACE payload),
  // 40 bytes, then 5000 more bytes of the stream after 64 lost ones (a second payload).
  TempArchive file;
  std::vector<uint8_t> pt = ManyMixedPt(0, 5u << 19);
  pt.resize(5u << 19);
  const std::vector<uint8_t> tail(pt.begin() + 12345, pt.begin() + 17345);
  {
    FILE* f = std::fopen(file.path.c_str(), "wb");
    REQUIRE(f != nullptr);
    std::vector<uint8_t> junk(100, 0x5a);
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fwrite(pt.data(), 1, pt.size(), f);
    std::fwrite(junk.data(), 1, 40, f);
    std::fwrite(tail.data(), 1, tail.size(), f);
    std::fclose(f);
  }
  format::Archive archive;
  archive.path = file.path;
  for (int i = 0; i < 2; ++i) {
    format::PtDataChunk chunk;
    chunk.stream_id = 1;
    chunk.tid = 5;
    chunk.stream_offset = i == 0 ? 0 : pt.size() + 64;
    archive.pt_data.push_back(chunk);
  }
  archive.pt_refs = {{.chunk_offset = 100, .size = pt.size(), .raw = true},
                     {.chunk_offset = 100 + pt.size() + 40, .size = tail.size(), .raw = true}};
  std::vector<Stream> streams = CollectStreams(archive, SidebandTimeline::Build(archive));
  REQUIRE(streams.size() == 1);
  REQUIRE(streams[0].pieces.size() == 2);
  const Piece& big = streams[0].pieces[0];
  REQUIRE(big.chunks.size() == 3);
  CHECK(big.chunks[0].size == Piece::kRawChunkBytes);
  CHECK(big.chunks[1].chunk_offset == 100 + Piece::kRawChunkBytes);
  CHECK(big.chunks[1].piece_offset == Piece::kRawChunkBytes);
  CHECK(big.chunks[2].size == pt.size() - 2 * Piece::kRawChunkBytes);
  CHECK(streams[0].pieces[1].loss_before.find("64 bytes of trace lost") == 0);
  PieceReader reader(file.path);
  auto whole = reader.Bytes(big, 0, big.size);
  REQUIRE(whole);
  CHECK(std::equal(whole->begin(), whole->end(), pt.begin(), pt.end()));
  for (size_t begin : {size_t{0}, Piece::kRawChunkBytes - 7, size_t{2} * Piece::kRawChunkBytes + 1}) {
    auto got = reader.Bytes(big, begin, begin + 4096);
    REQUIRE(got);
    CHECK(std::equal(got->begin(), got->end(), pt.begin() + begin));
  }
  auto second = reader.Bytes(streams[0].pieces[1], 0, tail.size());
  REQUIRE(second);
  CHECK(std::equal(second->begin(), second->end(), tail.begin(), tail.end()));
  pt_config config;
  pt_config_init(&config);
  // Units (every field) and their bytes, across the 1 MiB raw chunks.
  CHECK(SameUnits(CutAll(reader, big, pt, config, 64 * 1024),
                  ReferenceSplit(pt, config, 64 * 1024)));
  // The file shrinks under the decoder: an error naming it and the offset, not other bytes.
  REQUIRE(truncate(file.path.c_str(), 100 + Piece::kRawChunkBytes + 10) == 0);
  PieceReader after(file.path);
  auto cut = after.Bytes(big, Piece::kRawChunkBytes, Piece::kRawChunkBytes + 100);
  REQUIRE(!cut);
  CHECK(cut.error().message ==
        file.path + ": offset " + std::to_string(100 + Piece::kRawChunkBytes + 10) +
            ": the file ends there (it changed since it was first read?)");
  std::remove(file.path.c_str());  // and gone altogether
  PieceReader gone(file.path);
  auto missing = gone.Bytes(big, 0, 100);
  REQUIRE(!missing);
  CHECK(missing.error().message ==
        file.path + ": cannot open again to read its trace: No such file or directory");
}

}  // namespace
}  // namespace ptscope::decode
