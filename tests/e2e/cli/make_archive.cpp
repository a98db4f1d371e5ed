// Writes small .ptar archives for the pt-archive command-line tests:
//   make_archive sample OUT       every chunk type, sideband with every record kind, Close()d
//   make_archive incomplete OUT   the same chunks without the End chunk (a killed writer)
//   make_archive rewritten OUT    the sample with a second Metadata chunk at the end that writes
//                                 some keys again, as pt-record writes time.* once known
//   make_archive newer OUT        a header of format version 2 that needs reader version 2
//   make_archive big-blobs OUT    24 blobs of 64 MiB each that lz4 packs 255:1 (1.5 GiB in a
//                                 6 MiB file: what no reader may hold at once), a bit of PT
// The contents are fixed (including the creation time) so the expected output is stable.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "crc32c.h"
#include "ptscope/format.h"
#include "ptscope/perf_records.h"

namespace fmt = ptscope::format;
namespace perf = ptscope::perf;

namespace {

constexpr uint64_t kCreated = 1767225600123456789ull;  // 2026-01-01T00:00:00.123456789Z

std::vector<uint8_t> Records() {
  const perf::RecordLayout layout{0x10086, true};
  std::vector<perf::Record> records;
  auto add = [&records](perf::RecordBody body, uint32_t pid, uint32_t tid, uint64_t time) {
    perf::Record r;
    r.misc = perf::kMiscUser;
    r.body = std::move(body);
    r.sample_id = perf::SampleId{pid, tid, time, 1, 0, 0};
    records.push_back(std::move(r));
  };
  add(perf::CommRecord{100, 100, "demo", true}, 100, 100, 1000);
  perf::MmapRecord mmap;
  mmap.pid = mmap.tid = 100;
  mmap.addr = 0x400000;
  mmap.len = 0x2000;
  mmap.build_id = {0x12, 0x34, 0x56, 0x78};
  mmap.prot = 5;
  mmap.flags = 2;
  mmap.filename = "/usr/bin/demo";
  add(mmap, 100, 100, 1100);
  add(perf::ItraceStartRecord{100, 100}, 100, 100, 1200);
  add(perf::TaskRecord{100, 100, 101, 100, 1300, false}, 100, 101, 1300);
  add(perf::CommRecord{100, 101, "worker", false}, 100, 101, 1400);
  add(perf::SwitchRecord{true, true, false, 0, 0}, 100, 101, 1500);
  add(perf::AuxRecord{0, 4096, perf::kAuxFlagTruncated}, 100, 100, 1600);
  add(perf::LostRecord{1, 3}, 100, 100, 1700);
  add(perf::TaskRecord{100, 100, 101, 100, 1800, true}, 100, 101, 1800);
  add(perf::TaskRecord{200, 100, 200, 100, 1900, false}, 200, 200, 1900);
  add(perf::CommRecord{200, 200, "child", true}, 200, 200, 2000);
  std::vector<uint8_t> out;
  for (const perf::Record& r : records) {
    std::vector<uint8_t> bytes = perf::BuildRecord(r, layout);
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

std::vector<uint8_t> PtBytes(size_t n) {  // PSB-like, compressible
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = (i % 16 < 14) ? (i % 2 ? 0x82 : 0x02) : 0x23;
  return out;
}

bool WriteSample(const std::string& path, bool close, bool rewritten = false) {
  fmt::WriterOptions options;
  options.features = fmt::kFeatureEmulated | fmt::kFeatureEmbeddedBinaries;
  options.created_unix_ns = kCreated;
  auto writer = fmt::ArchiveWriter::Create(path, options);
  if (!writer) {
    std::fprintf(stderr, "make_archive: %s\n", writer.error().message.c_str());
    return false;
  }
  fmt::ArchiveWriter& w = **writer;
  std::vector<fmt::Chunk> chunks;
  // First chunk: a 41-byte Marker (too small to compress), so chunk 1 starts at 40 + 32 + 48 = 0x78.
  chunks.push_back(fmt::MarkerChunk{fmt::MarkerKind::kCaptureStart, 500, 100, 100, -1, 0, "start"});
  chunks.push_back(fmt::MetadataChunk{{{"tool", "pt-emulate"}, {"tool.version", "0.1.0"},
                                       {"capture.mode", "full"}, {"cpu.vendor", "GenuineIntel"}}});
  chunks.push_back(fmt::SidebandAttrChunk{1, 0x10086, 0, true, {1}, {}});
  chunks.push_back(fmt::SidebandChunk{1, -1, Records()});
  fmt::PtDataChunk pt;
  pt.stream_id = 1;
  pt.pid = 100;
  pt.tid = 100;
  pt.reference_tsc = 0x1000;
  pt.data = PtBytes(1000);
  chunks.push_back(pt);
  pt.stream_offset = 1500;  // 500 bytes missing between the pieces
  pt.bytes_lost_before = 0;
  pt.flags = fmt::kPtTruncated;
  pt.reference_tsc = 0x2000;
  pt.data = PtBytes(200);
  chunks.push_back(pt);
  fmt::PtDataChunk thread;
  thread.stream_id = 2;
  thread.pid = 100;
  thread.tid = 101;
  thread.bytes_lost_before = 64;
  thread.flags = fmt::kPtOverwritten | fmt::kPtSnapshot;
  thread.snapshot_index = 1;
  thread.data = PtBytes(100);
  chunks.push_back(thread);
  chunks.push_back(fmt::ModuleChunk{"/usr/bin/demo", {0x12, 0x34, 0x56, 0x78}, 8192, 0, true});
  chunks.push_back(fmt::ModuleChunk{"/usr/lib/libc.so.6", {}, 1 << 20, 0, false});
  chunks.push_back(fmt::BlobChunk{fmt::BlobKind::kVdso, "vdso64", 100, 0x7fff0000, {}, {1, 2, 3, 4}});
  chunks.push_back(fmt::BlobChunk{fmt::BlobKind::kElf, "/usr/bin/demo", 0, 0,
                                  {0x12, 0x34, 0x56, 0x78}, {0x7f, 'E', 'L', 'F'}});
  chunks.push_back(fmt::BlobChunk{fmt::BlobKind::kJitdump, "../../etc/evil\tname", 100, 0, {},
                                  {'j', 'i', 't'}});
  chunks.push_back(fmt::MarkerChunk{fmt::MarkerKind::kTrigger, 900, 100, 101, 0, 0x401000, "main"});
  chunks.push_back(fmt::TimeSyncChunk{1, {{10, 20}, {30, 40}}});
  if (rewritten) {
    chunks.push_back(fmt::MetadataChunk{{{"capture.mode", "full"}, {"cpu.vendor", "AuthenticAMD"},
                                         {"trigger.reason", "exit"}}});
  }
  for (const fmt::Chunk& c : chunks) {
    if (auto s = w.Write(c); !s) {
      std::fprintf(stderr, "make_archive: %s\n", s.error().message.c_str());
      return false;
    }
  }
  if (close && !w.Close()) return false;
  return true;
}

bool WriteNewer(const std::string& path) {
  std::vector<uint8_t> h(40, 0);
  const uint8_t magic[8] = {'P', 'T', 'A', 'R', '\r', '\n', 0x1a, '\n'};
  std::memcpy(h.data(), magic, 8);
  h[8] = 2;   // version_major
  h[12] = 2;  // min_reader_major
  h[14] = 40; // header_size
  uint32_t crc = fmt::Crc32c(h);
  for (int i = 0; i < 4; ++i) h[32 + i] = static_cast<uint8_t>(crc >> (8 * i));
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size()));
  return static_cast<bool>(out);
}

// 20 jitdump blobs (which the decoder reads, one at a time, to find JIT code) and 4 embedded
// binaries no module needs, each 64 MiB of one repeated byte.
bool WriteBigBlobs(const std::string& path) {
  auto writer = fmt::ArchiveWriter::Create(path, fmt::WriterOptions{.created_unix_ns = kCreated});
  if (!writer) return false;
  bool ok = static_cast<bool>((*writer)->Write(fmt::MetadataChunk{{{"tool", "make_archive"}}}));
  fmt::PtDataChunk pt;
  pt.stream_id = 1;
  pt.pid = pt.tid = 100;
  pt.data.assign(64, 0x02);
  ok = ok && (*writer)->Write(pt);
  for (int i = 0; i < 24 && ok; ++i) {
    fmt::BlobChunk blob;
    blob.kind = i < 20 ? fmt::BlobKind::kJitdump : fmt::BlobKind::kElf;
    blob.pid = 100;
    blob.name = "/tmp/jit-" + std::to_string(i) + ".dump";
    if (i >= 20) blob.build_id = {0xb1, static_cast<uint8_t>(i)};
    blob.data.assign(64u << 20, static_cast<uint8_t>(i));
    ok = static_cast<bool>((*writer)->Write(blob));
  }
  return ok && (*writer)->Close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_archive sample|incomplete|rewritten|newer|big-blobs OUT\n");
    return 2;
  }
  std::string mode = argv[1];
  bool ok = mode == "sample"       ? WriteSample(argv[2], true)
            : mode == "incomplete" ? WriteSample(argv[2], false)
            : mode == "rewritten"  ? WriteSample(argv[2], true, true)
            : mode == "newer"      ? WriteNewer(argv[2])
            : mode == "big-blobs"  ? WriteBigBlobs(argv[2])
                                   : false;
  return ok ? 0 : 1;
}
