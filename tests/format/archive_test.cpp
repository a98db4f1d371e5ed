// Round trips of every chunk type through a real file, exact header bytes, file mode, and the
// errors for files that are not archives.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "ptscope/capture.h"
#include "ptscope/format.h"
#include "ptscope/perf_records.h"
#include "../support/sideband_records.h"
#include "../support/temp_dir.h"
#include "test_archives.h"

namespace ptscope::format {
namespace {

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void CheckSame(const MetadataChunk& a, const MetadataChunk& b) { CHECK(a.entries == b.entries); }
void CheckSame(const PtDataChunk& a, const PtDataChunk& b) {
  CHECK(a.stream_id == b.stream_id);
  CHECK(a.cpu == b.cpu);
  CHECK(a.pid == b.pid);
  CHECK(a.tid == b.tid);
  CHECK(a.stream_offset == b.stream_offset);
  CHECK(a.reference_tsc == b.reference_tsc);
  CHECK(a.flags == b.flags);
  CHECK(a.bytes_lost_before == b.bytes_lost_before);
  CHECK(a.snapshot_index == b.snapshot_index);
  CHECK(a.data == b.data);
}
void CheckSame(const SidebandAttrChunk& a, const SidebandAttrChunk& b) {
  CHECK(a.attr_id == b.attr_id);
  CHECK(a.sample_type == b.sample_type);
  CHECK(a.read_format == b.read_format);
  CHECK(a.sample_id_all == b.sample_id_all);
  CHECK(a.ids == b.ids);
  CHECK(a.raw_attr == b.raw_attr);
}
void CheckSame(const SidebandChunk& a, const SidebandChunk& b) {
  CHECK(a.attr_id == b.attr_id);
  CHECK(a.cpu == b.cpu);
  CHECK(a.records == b.records);
}
void CheckSame(const ModuleChunk& a, const ModuleChunk& b) {
  CHECK(a.path == b.path);
  CHECK(a.build_id == b.build_id);
  CHECK(a.size == b.size);
  CHECK(a.mtime_ns == b.mtime_ns);
  CHECK(a.embedded == b.embedded);
}
void CheckSame(const BlobChunk& a, const BlobChunk& b) {
  CHECK(a.kind == b.kind);
  CHECK(a.name == b.name);
  CHECK(a.pid == b.pid);
  CHECK(a.vaddr == b.vaddr);
  CHECK(a.build_id == b.build_id);
  CHECK(a.data == b.data);
}
void CheckSame(const MarkerChunk& a, const MarkerChunk& b) {
  CHECK(a.kind == b.kind);
  CHECK(a.tsc == b.tsc);
  CHECK(a.pid == b.pid);
  CHECK(a.tid == b.tid);
  CHECK(a.cpu == b.cpu);
  CHECK(a.value == b.value);
  CHECK(a.text == b.text);
}
void CheckSame(const TimeSyncChunk& a, const TimeSyncChunk& b) {
  CHECK(a.clock_id == b.clock_id);
  CHECK(a.tsc_and_clock_ns == b.tsc_and_clock_ns);
}
void CheckSame(const EndChunk& a, const EndChunk& b) { CHECK(a.chunk_count == b.chunk_count); }

void CheckSameChunk(const Chunk& got, const Chunk& want) {
  REQUIRE(got.index() == want.index());
  std::visit([&got](const auto& w) { CheckSame(std::get<std::decay_t<decltype(w)>>(got), w); },
             want);
}

void RoundTrip(bool compress) {
  const ptscope::testing::TempDir dir("ptscope-format");
  std::string path = dir / "capture.ptar";
  std::vector<Chunk> chunks = testing::EveryChunkType();
  WriterOptions options;
  options.compress = compress;
  options.features = kFeatureEmulated | kFeatureSnapshot;
  auto writer = ArchiveWriter::Create(path, options);
  REQUIRE(writer);
  for (const Chunk& c : chunks) REQUIRE((*writer)->Write(c));
  REQUIRE((*writer)->Close());
  CHECK((*writer)->chunks_written() == chunks.size() + 1);
  CHECK((*writer)->bytes_written() == ReadFile(path).size());

  auto reader = ArchiveReader::Open(path);
  REQUIRE(reader);
  CHECK((*reader)->header().version_major == 1);
  CHECK((*reader)->header().version_minor == 0);
  CHECK((*reader)->header().features == (kFeatureEmulated | kFeatureSnapshot));
  CHECK((*reader)->header().created_unix_ns > 1600000000000000000ull);
  for (size_t i = 0; i < chunks.size(); ++i) {
    CAPTURE(i);
    std::optional<Chunk> got = (*reader)->Next();
    REQUIRE(got);
    CheckSameChunk(*got, chunks[i]);
    // The repetitive 3000-byte PT payload must shrink under lz4; the 40-byte Marker is below the
    // 64-byte threshold; without compression nothing is compressed.
    uint16_t lz4 = (*reader)->last_location().flags & 1;
    if (!compress || i == 6) CHECK(lz4 == 0);
    if (compress && i == 1) CHECK(lz4 == 1);
    if (i == 1) CHECK((*reader)->last_location().raw_size == 3000 + 56);  // 48 bytes of fields + u64 length
  }
  std::optional<Chunk> end = (*reader)->Next();
  REQUIRE(end);
  CheckSameChunk(*end, EndChunk{chunks.size()});
  CHECK(!(*reader)->Next());
  CHECK((*reader)->complete());
  CHECK((*reader)->damage().empty());
  CHECK((*reader)->chunks_read() == chunks.size() + 1);
}

TEST_CASE("every chunk type round-trips without compression") { RoundTrip(false); }
TEST_CASE("every chunk type round-trips with lz4") { RoundTrip(true); }

TEST_CASE("ReadArchive sorts chunks by kind and merges metadata") {
  const ptscope::testing::TempDir dir("ptscope-format");
  std::string path = dir / "a.ptar";
  auto writer = ArchiveWriter::Create(path);
  REQUIRE(writer);
  for (const Chunk& c : testing::EveryChunkType()) REQUIRE((*writer)->Write(c));
  REQUIRE((*writer)->Write(MetadataChunk{{{"tool", "pt-record"}}}));
  REQUIRE((*writer)->Close());
  auto archive = ReadArchive(path);
  REQUIRE(archive);
  CHECK(archive->complete);
  CHECK(archive->chunks_read == 10);
  CHECK(archive->metadata.size() == 4);
  CHECK(archive->Get("tool") == std::optional<std::string>("pt-record"));
  CHECK(archive->Get("pt.mtc_period") == std::optional<std::string>("3"));
  CHECK(!archive->Get("missing"));
  CHECK(archive->pt_data.size() == 1);
  CHECK(archive->sideband_attrs.size() == 1);
  CHECK(archive->sideband.size() == 1);
  CHECK(archive->modules.size() == 1);
  CHECK(archive->blobs.size() == 1);
  CHECK(archive->markers.size() == 1);
  CHECK(archive->time_syncs.size() == 1);
}

TEST_CASE("ReadArchive checks the time conversion once: Archive::time, or an error naming it") {
  const ptscope::testing::TempDir dir("ptscope-format");
  std::string path = dir / "time.ptar";
  auto write = [&](const MetadataChunk& metadata) {
    auto writer = ArchiveWriter::Create(path);
    REQUIRE(writer);
    REQUIRE((*writer)->Write(metadata));
    REQUIRE((*writer)->Close());
  };
  write(MetadataChunk{{{"time.shift", "10"}, {"time.mult", "1000"}, {"time.zero", "5"}}});
  auto archive = ReadArchive(path);
  REQUIRE(archive);
  REQUIRE(archive->time);
  CHECK(archive->time->perf.TscToNs(1024) == 1005);
  // The later Metadata chunk wins, and its 2^32 does not fit perf's 32-bit mult.
  write(MetadataChunk{{{"time.shift", "10"}, {"time.mult", "1000"}, {"time.mult", "4294967296"}}});
  auto refused = ReadArchive(path);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message ==
        path + ": metadata time.mult=4294967296 does not fit perf's 32-bit time_mult (at most "
               "4294967295) (the capture's time conversion is damaged; pt-archive info lists the "
               "metadata)");
  write(MetadataChunk{{{"tool", "x"}}});
  archive = ReadArchive(path);
  REQUIRE(archive);
  CHECK_FALSE(archive->time);
}

TEST_CASE("file header and End chunk have the documented bytes") {
  const ptscope::testing::TempDir dir("ptscope-format");
  std::string path = dir / "h.ptar";
  WriterOptions options;
  options.features = 0x0102030405060708ull;
  auto writer = ArchiveWriter::Create(path, options);
  REQUIRE(writer);
  REQUIRE((*writer)->Close());
  std::vector<uint8_t> bytes = ReadFile(path);
  REQUIRE(bytes.size() == 40 + 32 + 8);
  const std::vector<uint8_t> magic_and_versions = {'P', 'T', 'A', 'R', '\r', '\n', 0x1a, '\n',
                                                   1, 0, 0, 0, 1, 0, 40, 0,
                                                   8, 7, 6, 5, 4, 3, 2, 1};
  CHECK(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 24) == magic_and_versions);
  CHECK(std::vector<uint8_t>(bytes.begin() + 36, bytes.begin() + 40) ==
        std::vector<uint8_t>{0, 0, 0, 0});
  // End chunk: "PTCK", type 15, flags 0, stored 8, raw 8, then CRCs, then chunk_count 0.
  const std::vector<uint8_t> end_head = {'P', 'T', 'C', 'K', 15, 0, 0, 0,
                                         8, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0};
  CHECK(std::vector<uint8_t>(bytes.begin() + 40, bytes.begin() + 64) == end_head);
  // CRC32C of eight zero bytes = 0x8c28b28a (computed bitwise by an independent script).
  CHECK(std::vector<uint8_t>(bytes.begin() + 64, bytes.begin() + 68) ==
        std::vector<uint8_t>{0x8a, 0xb2, 0x28, 0x8c});
  CHECK(std::vector<uint8_t>(bytes.begin() + 72, bytes.end()) == std::vector<uint8_t>(8, 0));
}

TEST_CASE("archives are created 0600, also when replacing a 0644 file") {
  const ptscope::testing::TempDir dir("ptscope-format");
  std::string path = dir / "old.ptar";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::fchmod(fd, 0644) == 0);
  REQUIRE(::write(fd, "old contents", 12) == 12);
  ::close(fd);
  auto writer = ArchiveWriter::Create(path);
  REQUIRE(writer);
  REQUIRE((*writer)->Close());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(st.st_size == 80);
}

TEST_CASE("writing after Close is an error, not a crash") {
  const ptscope::testing::TempDir dir("ptscope-format");
  auto writer = ArchiveWriter::Create(dir / "c.ptar");
  REQUIRE(writer);
  REQUIRE((*writer)->Close());
  Status s = (*writer)->Write(EndChunk{});
  REQUIRE(!s);
  CHECK(s.error().code == Errc::kInvalidArgument);
}

TEST_CASE("an archive without Close reads back incomplete with every chunk") {
  const ptscope::testing::TempDir dir("ptscope-format");
  std::string path = dir / "killed.ptar";
  {
    auto writer = ArchiveWriter::Create(path);
    REQUIRE(writer);
    for (const Chunk& c : testing::EveryChunkType()) REQUIRE((*writer)->Write(c));
  }  // destroyed without Close(), like a killed recorder
  auto archive = ReadArchive(path);
  REQUIRE(archive);
  CHECK(!archive->complete);
  CHECK(archive->damage.empty());
  CHECK(archive->chunks_read == 8);
}

TEST_CASE("a failed write leaves no torn chunk behind (file size limit hit mid-chunk)") {
  const ptscope::testing::TempDir dir("ptscope-format");
  std::string path = dir / "limited.ptar";
  auto writer = ArchiveWriter::Create(path, WriterOptions{.compress = false});
  REQUIRE(writer);
  REQUIRE((*writer)->Write(MarkerChunk{}));
  uint64_t good_size = (*writer)->bytes_written();
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = old;
  limited.rlim_cur = good_size + 100;  // the next chunk is written only partly
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  PtDataChunk big;
  big.data = testing::NoiseBytes(1000, 3);
  Status s = (*writer)->Write(big);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
  std::signal(SIGXFSZ, old_handler);
  REQUIRE(!s);
  CHECK(s.error().code == Errc::kIo);
  CHECK(s.error().message == path + ": write failed: File too large (the file grew past the file "
                                    "system's or ulimit -f's size limit); the 1 chunk written "
                                    "before stays readable (the archive is incomplete)");
  CHECK(ReadFile(path).size() == good_size);
  REQUIRE((*writer)->Write(MarkerChunk{}));  // writing goes on after the cut
  REQUIRE((*writer)->Close());
  auto archive = ReadArchive(path);
  REQUIRE(archive);
  CHECK(archive->complete);
  CHECK(archive->damage.empty());
  CHECK(archive->markers.size() == 2);
}

// Three PT chunks (one lz4-compressed, one not, one empty) between other chunks.
std::string WritePtArchive(const std::string& dir) {
  std::string path = dir + "/pt.ptar";
  auto writer = ArchiveWriter::Create(path);
  REQUIRE(writer);
  REQUIRE((*writer)->Write(MetadataChunk{{{"tool", "test"}}}));
  for (uint32_t i = 0; i < 3; ++i) {
    PtDataChunk pt;
    pt.stream_id = 1;
    pt.tid = 10;
    pt.stream_offset = i * 5000;
    pt.data = i == 0 ? testing::RepetitiveBytes(5000) : i == 1 ? testing::NoiseBytes(5000, 3)
                                                               : std::vector<uint8_t>{};
    REQUIRE((*writer)->Write(pt));
    REQUIRE((*writer)->Write(SidebandChunk{1, 0, testing::NoiseBytes(40, i)}));
  }
  REQUIRE((*writer)->Close());
  return path;
}

TEST_CASE("ReadChunkAt reads a chunk again by its offset, checked, without moving Next()") {
  const ptscope::testing::TempDir dir("ptscope-format");
  std::string path = WritePtArchive(dir.path);
  auto reader = ArchiveReader::Open(path);
  REQUIRE(reader);
  std::vector<uint64_t> offsets;
  std::vector<Chunk> chunks;
  while (auto chunk = (*reader)->Next()) {
    offsets.push_back((*reader)->last_location().offset);
    chunks.push_back(std::move(*chunk));
    if (chunks.size() == 3) {
      // Out of sequence, in the middle of a pass: the pass goes on where it was.
      auto again = (*reader)->ReadChunkAt(offsets[1]);
      REQUIRE(again);
      CHECK(std::get<PtDataChunk>(*again).data == testing::RepetitiveBytes(5000));
      CHECK((*reader)->last_location().offset == offsets[2]);
    }
  }
  CHECK((*reader)->complete());
  CHECK((*reader)->damage().empty());
  REQUIRE(chunks.size() == 8);  // metadata, 3 x (PT, sideband), End
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    auto again = (*reader)->ReadChunkAt(offsets[i]);
    REQUIRE(again);
    CHECK(TypeOf(*again) == TypeOf(chunks[i]));
    if (auto* pt = std::get_if<PtDataChunk>(&chunks[i])) {
      CHECK(std::get<PtDataChunk>(*again).data == pt->data);
      CHECK(std::get<PtDataChunk>(*again).stream_offset == pt->stream_offset);
    }
  }
  // Offsets where no chunk starts: inside one, unaligned, past the end.
  // The message names the file and the offset exactly (it is made only on these paths).
  auto at = [](const std::string& file, uint64_t offset) {
    char hex[24];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(offset));
    return file + ": chunk at offset " + hex + ": ";
  };
  for (uint64_t bad : {offsets[1] + 3, (*reader)->file_size() + 64}) {
    auto missing = (*reader)->ReadChunkAt(bad);
    REQUIRE(!missing);
    CHECK(missing.error().code == Errc::kCorrupt);
    CHECK(missing.error().message ==
          at(path, bad) + "no chunk starts there (offset past the end, or unaligned)");
  }
  auto inside = (*reader)->ReadChunkAt(offsets[1] + 8);  // aligned, inside a chunk: no header
  REQUIRE(!inside);
  CHECK(inside.error().message.find(at(path, offsets[1] + 8)) == 0);
  // A damaged payload is reported as damage at that offset, and Next() is not affected.
  std::vector<uint8_t> bytes = ReadFile(path);
  bytes[offsets[3] + 32 + 100] ^= 0xff;  // inside the second PT chunk's (uncompressed) payload
  std::string damaged = path + ".damaged";
  std::ofstream(damaged, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                 static_cast<std::streamsize>(bytes.size()));
  auto damaged_reader = ArchiveReader::Open(damaged);
  REQUIRE(damaged_reader);
  auto broken = (*damaged_reader)->ReadChunkAt(offsets[3]);
  REQUIRE(!broken);
  CHECK(broken.error().code == Errc::kChecksum);
  CHECK(broken.error().message.find(at(damaged, offsets[3]) + "payload checksum mismatch") == 0);
  CHECK((*damaged_reader)->Next().has_value());  // the metadata chunk, from the start
  CHECK((*damaged_reader)->damage().empty());
}

TEST_CASE("ReadArchive without PT bytes keeps every other field and where to read them") {
  const ptscope::testing::TempDir dir("ptscope-format");
  std::string path = WritePtArchive(dir.path);
  auto whole = ReadArchive(path);
  auto light = ReadArchive(path, ReadOptions{.keep_pt_bytes = false});
  REQUIRE(whole);
  REQUIRE(light);
  REQUIRE(light->pt_data.size() == 3);
  REQUIRE(light->pt_refs.size() == 3);
  REQUIRE(whole->pt_refs.size() == 3);
  auto reader = ArchiveReader::Open(path);
  REQUIRE(reader);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(light->pt_data[i].data.empty());
    CHECK(light->pt_data[i].stream_offset == whole->pt_data[i].stream_offset);
    CHECK(light->pt_refs[i].size == whole->pt_data[i].data.size());
    CHECK(light->pt_refs[i].chunk_offset == whole->pt_refs[i].chunk_offset);
    auto again = (*reader)->ReadChunkAt(light->pt_refs[i].chunk_offset);
    REQUIRE(again);
    CHECK(std::get<PtDataChunk>(*again).data == whole->pt_data[i].data);
  }
  CHECK(light->pt_refs[0].size == 5000);
  CHECK(light->pt_refs[2].size == 0);
  CHECK(light->sideband.size() == 3);
  CHECK(light->complete);
}

// Three sideband chunks of four CPU-wide switch records each (time c*100+i, next tid 100+4c+i).
std::string WriteSidebandArchive(const std::string& path) {
  auto writer = ArchiveWriter::Create(path);
  REQUIRE(writer);
  SidebandAttrChunk attr;
  attr.attr_id = 1;
  attr.sample_type = ptscope::testing::kSidebandSampleType;
  attr.sample_id_all = true;
  REQUIRE((*writer)->Write(attr));
  for (uint32_t c = 0; c < 3; ++c) {
    std::vector<uint8_t> records;
    for (uint32_t i = 0; i < 4; ++i) {
      const std::vector<uint8_t> bytes = ptscope::testing::SidebandRecord(
          perf::kRecordSwitchCpuWide, 0, perf::SwitchRecord{i % 2 == 0, false, true, 7, 100 + 4 * c + i},
          7, 7, c * 100 + i, c);
      records.insert(records.end(), bytes.begin(), bytes.end());
    }
    REQUIRE((*writer)->Write(SidebandChunk{1, -1, records}));
  }
  REQUIRE((*writer)->Close());
  return path;
}

// (time, next tid) of every sideband record, and the problems met.
std::vector<std::pair<uint64_t, uint32_t>> SwitchesOf(const Archive& archive,
                                                      std::vector<SidebandProblem>* problems) {
  std::vector<std::pair<uint64_t, uint32_t>> seen;
  *problems = ForEachSidebandRecord(archive, [&](perf::Record&& r) {
    seen.emplace_back(r.sample_id->time, std::get<perf::SwitchRecord>(r.body).next_prev_tid);
  });
  return seen;
}

TEST_CASE("ReadArchive without sideband bytes: ForEachSidebandRecord reads each chunk again") {
  const ptscope::testing::TempDir dir("ptscope-format");
  const std::string path = WriteSidebandArchive(dir / "sideband.ptar");
  auto whole = ReadArchive(path);
  auto light = ReadArchive(path, ReadOptions{.keep_sideband_bytes = false});
  REQUIRE(whole);
  REQUIRE(light);
  REQUIRE(light->sideband.size() == 3);
  CHECK(light->sideband_offsets.size() == 3);
  CHECK(whole->sideband_offsets.empty());
  for (const SidebandChunk& chunk : light->sideband) CHECK(chunk.records.empty());
  std::vector<SidebandProblem> problems;
  const auto kept = SwitchesOf(*whole, &problems);
  CHECK(problems.empty());
  const auto read_again = SwitchesOf(*light, &problems);
  CHECK(problems.empty());
  REQUIRE(kept.size() == 12);
  CHECK(kept[5] == std::pair<uint64_t, uint32_t>{101, 105});
  CHECK(read_again == kept);
  // Chunk 1 alone (read again), each record told its chunk: times 100 to 103.
  std::vector<std::pair<size_t, uint64_t>> one;
  CHECK(ForEachSidebandRecordIn(*light, 1, 2, [&](size_t chunk, perf::Record&& r) {
          one.emplace_back(chunk, r.sample_id->time);
        }).empty());
  CHECK(one == std::vector<std::pair<size_t, uint64_t>>{{1, 100}, {1, 101}, {1, 102}, {1, 103}});

  // The file replaced since by an archive without those chunks: each is a problem naming its
  // offset, nothing is made up.
  {
    auto writer = ArchiveWriter::Create(path);
    REQUIRE(writer);
    REQUIRE((*writer)->Write(MetadataChunk{{{"tool", "another"}}}));
    REQUIRE((*writer)->Close());
  }
  CHECK(SwitchesOf(*light, &problems).empty());
  REQUIRE(problems.size() == 3);
  CHECK(problems[0].Describe().find("sideband chunk 0 offset 0: read again at file offset 0x") == 0);
  for (const SidebandProblem& problem : problems) CHECK(problem.unread == 1);
  // Gone: one problem for the chunks asked for.
  REQUIRE(std::remove(path.c_str()) == 0);
  problems = ForEachSidebandRecordIn(*light, 1, 3, [](size_t, perf::Record&&) {});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].unread == 2);
  CHECK(problems[0].chunk == 1);
  CHECK(problems[0].Describe().find("sideband chunk 1 offset 0: cannot read the sideband again "
                                    "(chunks 1 to 2): ") == 0);
}

TEST_CASE("files that are not archives are refused with a one-line reason") {
  const ptscope::testing::TempDir temp("ptscope-format");
  std::string dir = temp.path;
  SUBCASE("missing") {
    auto r = ArchiveReader::Open(dir + "/nope.ptar");
    REQUIRE(!r);
    CHECK(r.error().code == Errc::kNotFound);
    CHECK(r.error().message == dir + "/nope.ptar: cannot open: No such file or directory");
  }
  SUBCASE("directory") {
    auto r = ArchiveReader::Open(dir);
    REQUIRE(!r);
    CHECK(r.error().message == dir + ": is a directory, not an archive file");
  }
  SUBCASE("empty") {
    std::string path = dir + "/empty.ptar";
    std::ofstream(path).close();
    auto r = ArchiveReader::Open(path);
    REQUIRE(!r);
    CHECK(r.error().code == Errc::kTruncated);
    CHECK(r.error().message == path + ": empty file (0 bytes), not an archive");
  }
  SUBCASE("an ELF file") {
    auto r = ArchiveReader::FromBytes({0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0}, "x");
    REQUIRE(!r);
    CHECK(r.error().code == Errc::kBadMagic);
    CHECK(r.error().message ==
          "x: not a ptscope archive (.ptar): bad magic at offset 0 (found 7f 45 4c 46 02 01 01 00)");
  }
}

}  // namespace
}  // namespace ptscope::format
