// Unit tests of the perf.data reader and writer (format/PERF_DATA.md): in-memory round trips,
// exact bytes of the documented layout, and exact errors for damaged or foreign input.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <string>
#include <tuple>

#include "ptscope/capture.h"
#include "ptscope/format.h"
#include "ptscope/perf_data.h"
#include "ptscope/perf_records.h"
#include "../support/perf_rounds.h"
#include "../support/sideband_records.h"

namespace fmt = ptscope::format;
namespace perf = ptscope::perf;

namespace {

constexpr uint64_t kSidebandType = ptscope::testing::kSidebandSampleType;

uint64_t Le(const std::vector<uint8_t>& b, size_t at, size_t n = 8) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{b.at(at + i)} << (8 * i);
  return v;
}
void PutLe(std::vector<uint8_t>& b, size_t at, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) b.at(at + i) = static_cast<uint8_t>(v >> (8 * i));
}

std::vector<uint8_t> Rec(uint32_t type, uint16_t misc, perf::RecordBody body, uint32_t pid,
                         uint32_t tid, uint64_t time, uint32_t cpu = 0) {
  return ptscope::testing::SidebandRecord(type, misc, std::move(body), pid, tid, time, cpu);
}

const std::vector<uint8_t> kBuildId = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6,
                                       7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

std::vector<uint8_t> ThreadSideband() {
  perf::CommRecord comm{100, 100, "prog", true};
  perf::MmapRecord mmap;
  mmap.pid = mmap.tid = 100;
  mmap.addr = 0x400000;
  mmap.len = 0x1000;
  mmap.build_id = kBuildId;
  mmap.prot = 5;
  mmap.flags = 2;
  mmap.filename = "/opt/prog";
  perf::TaskRecord fork{100, 100, 101, 100, 20, false};
  perf::AuxRecord aux{0, 13, perf::kAuxFlagTruncated};
  perf::TaskRecord exit{100, 100, 100, 100, 90, true};
  std::vector<uint8_t> out;
  for (const auto& r : {Rec(perf::kRecordComm, perf::kMiscCommExec, comm, 100, 100, 10),
                        Rec(perf::kRecordMmap2, perf::kMiscUser | perf::kMiscMmapBuildId, mmap, 100, 100, 11),
                        Rec(perf::kRecordFork, 0, fork, 100, 101, 20),
                        Rec(perf::kRecordAux, 0, aux, 100, 100, 30),
                        Rec(perf::kRecordExit, 0, exit, 100, 100, 90)}) {
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

fmt::PtDataChunk Piece(uint32_t stream, int32_t cpu, uint32_t tid, uint64_t offset, size_t n,
                       uint8_t fill, uint64_t reference) {
  fmt::PtDataChunk c;
  c.stream_id = stream;
  c.cpu = cpu;
  c.pid = tid;
  c.tid = tid;
  c.stream_offset = offset;
  c.reference_tsc = reference;
  c.data.assign(n, fill);
  return c;
}

fmt::Archive ThreadArchive() {
  fmt::Archive a;
  a.path = "mem.ptar";
  a.metadata = {{"pt.config", "0x2401"}, {"pt.pmu_type", "9"}, {"time.shift", "10"},
                {"time.mult", "1024"}, {"time.zero", "5"}, {"time.cap_user_time_zero", "1"},
                {"cpu.vendor", "GenuineIntel"}, {"cpu.family", "6"}, {"cpu.model", "85"},
                {"cpu.stepping", "4"}, {"host.name", "h1"}, {"kernel.release", "6.1.0-test"}};
  a.time = fmt::ParseTimeConversion(a.metadata, a.path).value();
  fmt::SidebandAttrChunk attr;
  attr.attr_id = 3;
  attr.sample_type = kSidebandType;
  attr.ids = {1};
  a.sideband_attrs.push_back(attr);
  fmt::SidebandChunk sb;
  sb.attr_id = 3;
  sb.records = ThreadSideband();
  a.sideband.push_back(sb);
  a.pt_data.push_back(Piece(0, -1, 100, 0, 13, 0x11, 0x1234));
  a.pt_data.push_back(Piece(0, -1, 100, 16, 16, 0x22, 0x1235));
  a.pt_data.push_back(Piece(1, -1, 101, 0, 8, 0x33, 0x1236));
  fmt::ModuleChunk m;
  m.path = "/opt/prog";
  m.build_id = kBuildId;
  a.modules.push_back(m);
  return a;
}

std::vector<uint8_t> Exported(const fmt::Archive& a) {
  auto bytes = fmt::ExportPerfDataToBytes(a);
  REQUIRE(bytes.has_value());
  return *bytes;
}

std::string ImportError(std::vector<uint8_t> bytes) {
  auto r = fmt::ImportPerfDataFromBytes(std::move(bytes), "t.data");
  REQUIRE_FALSE(r.has_value());
  return r.error().message;
}

// A perf.data on disk, removed at the end of the scope.
struct TempFile {
  std::string path;
  explicit TempFile(const std::vector<uint8_t>& bytes) {
    char name[] = "/tmp/ptscope-perf-data-XXXXXX";
    int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    path = name;
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }
  ~TempFile() { std::remove(path.c_str()); }
};

// The sideband of `archive` read again (ForEachSidebandRecord) from a file that holds `bytes`
// now: the problems, how many records were visited, and the file's path (for the messages;
// the file itself is gone when this returns).
struct ReadAgain {
  std::vector<fmt::SidebandProblem> problems;
  size_t visited = 0;
  std::string path;
};
ReadAgain ReadSidebandAgain(const fmt::Archive& archive, const std::vector<uint8_t>& bytes) {
  TempFile file(bytes);
  fmt::Archive moved = archive;
  moved.path = file.path;
  ReadAgain out;
  out.path = file.path;
  out.problems = fmt::ForEachSidebandRecord(moved, [&](perf::Record&&) { ++out.visited; });
  return out;
}

std::vector<uint8_t> FileBytes(const std::string& path, uint64_t offset, uint64_t size) {
  std::vector<uint8_t> out(size);
  FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::fseek(f, static_cast<long>(offset), SEEK_SET);
  size_t got = std::fread(out.data(), 1, out.size(), f);
  std::fclose(f);
  REQUIRE(got == out.size());
  return out;
}

std::vector<uint8_t> Padded(std::vector<uint8_t> v) {
  v.resize((v.size() + 7) / 8 * 8, 0);
  return v;
}

}  // namespace

TEST_CASE("export writes the documented header, attr and AUXTRACE_INFO bytes") {
  auto b = Exported(ThreadArchive());
  CHECK(std::memcmp(b.data(), "PERFILE2", 8) == 0);
  CHECK(Le(b, 8) == 104);           // header size
  CHECK(Le(b, 16) == 144);          // attr_size: 128-byte attr + ids section
  CHECK(Le(b, 24) == 112);          // attrs.offset (after the 8-byte ids array)
  CHECK(Le(b, 32) == 144);          // attrs.size
  CHECK(Le(b, 40) == 256);          // data.offset
  CHECK(Le(b, 104) == 1);           // the one id
  CHECK(Le(b, 112, 4) == 9);        // attr.type = pt.pmu_type
  CHECK(Le(b, 116, 4) == 128);      // attr.size
  CHECK(Le(b, 120) == 0x2401);      // attr.config = pt.config
  CHECK(Le(b, 136) == 0x10087);     // sample_type IP|TID|TIME|CPU|IDENTIFIER
  CHECK((Le(b, 152) >> 18 & 1) == 1);  // sample_id_all
  CHECK(Le(b, 240) == 104);         // ids section offset
  CHECK(Le(b, 248) == 8);           // ids section size
  CHECK(Le(b, 256, 4) == 70);       // AUXTRACE_INFO
  CHECK(Le(b, 262, 2) == 16 + 17 * 8);
  CHECK(Le(b, 264, 4) == 1);        // Intel PT
  CHECK(Le(b, 272) == 9);           // priv[PMU_TYPE]
  CHECK(Le(b, 280) == 10);          // TIME_SHIFT
  CHECK(Le(b, 288) == 1024);        // TIME_MULT
  CHECK(Le(b, 296) == 5);           // TIME_ZERO
  CHECK(Le(b, 304) == 1);           // CAP_USER_TIME_ZERO
  CHECK(Le(b, 72) == ((1u << 2) | (1u << 3) | (1u << 4) | (1u << 9) | (1u << 18)));
}

TEST_CASE("per-thread round trip keeps PT bytes (padded to 8), sideband and metadata") {
  fmt::Archive in = ThreadArchive();
  auto back = fmt::ImportPerfDataFromBytes(Exported(in), "rt.data");
  REQUIRE(back.has_value());
  REQUIRE(back->pt_data.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const auto& got = back->pt_data[i];
    CHECK(got.data == Padded(in.pt_data[i].data));
    CHECK(got.stream_offset == in.pt_data[i].stream_offset);
    CHECK(got.reference_tsc == in.pt_data[i].reference_tsc);
    CHECK(got.tid == in.pt_data[i].tid);
    CHECK(got.pid == 100);  // 101 is a thread of 100 (FORK)
    CHECK(got.cpu == -1);
    CHECK(got.bytes_lost_before == 0);
  }
  CHECK(back->pt_data[0].stream_id == 0);
  CHECK(back->pt_data[1].stream_id == 0);
  CHECK(back->pt_data[2].stream_id == 1);
  CHECK(back->pt_data[0].flags == fmt::kPtTruncated);  // the AUX record covers [0, 13)
  CHECK(back->pt_data[1].flags == 0);
  REQUIRE(back->sideband.size() == 1);
  CHECK(back->sideband[0].records == in.sideband[0].records);
  REQUIRE(back->sideband_attrs.size() == 1);
  CHECK(back->sideband_attrs[0].sample_type == 0x10087);
  CHECK(back->sideband_attrs[0].sample_id_all);
  CHECK(back->sideband_attrs[0].ids == std::vector<uint64_t>{1});
  CHECK(back->sideband[0].attr_id == back->sideband_attrs[0].attr_id);
  for (const char* key : {"pt.config", "pt.pmu_type", "time.shift", "time.mult", "time.zero",
                          "time.cap_user_time_zero", "cpu.vendor", "cpu.family", "cpu.model",
                          "cpu.stepping", "host.name", "kernel.release"}) {
    CAPTURE(key);
    CHECK(back->Get(key) == in.Get(key));
  }
  CHECK(back->Get("capture.mode") == "full");
  CHECK(back->Get("pt.tsc") == "1");
  CHECK(back->Get("pt.user") == "1");
  CHECK(back->Get("pt.kernel") == "0");
  CHECK(back->Get("perf.per_cpu_mmaps") == "0");
  REQUIRE(back->modules.size() == 1);
  CHECK(back->modules[0].path == "/opt/prog");
  CHECK(back->modules[0].build_id == kBuildId);
  CHECK(back->header.features == fmt::kFeatureImportedPerf);
}

TEST_CASE("per-CPU snapshot round trip keeps cpus and the CPU-wide switch sideband") {
  fmt::Archive a;
  a.path = "cpu.ptar";
  a.metadata = {{"capture.mode", "snapshot"}, {"pt.config", "0x2001"}};
  perf::SwitchRecord sw;
  sw.out = true;
  sw.cpu_wide = true;
  sw.next_prev_pid = sw.next_prev_tid = 7;
  fmt::SidebandChunk sb;
  sb.attr_id = 1;
  sb.records = Rec(perf::kRecordSwitchCpuWide, perf::kMiscSwitchOut, sw, 5, 5, 40, 1);
  fmt::SidebandAttrChunk attr;
  attr.attr_id = 1;
  attr.sample_type = kSidebandType;
  a.sideband_attrs.push_back(attr);
  a.sideband.push_back(sb);
  a.pt_data.push_back(Piece(0, 0, 0, 0, 24, 0x44, 0));
  a.pt_data.push_back(Piece(1, 1, 0, 0, 8, 0x55, 0));
  a.pt_data[0].flags = a.pt_data[1].flags = fmt::kPtSnapshot;
  auto back = fmt::ImportPerfDataFromBytes(Exported(a), "cpu.data");
  REQUIRE(back.has_value());
  REQUIRE(back->pt_data.size() == 2);
  CHECK(back->pt_data[0].cpu == 0);
  CHECK(back->pt_data[1].cpu == 1);
  CHECK(back->pt_data[1].tid == 0);
  CHECK(back->pt_data[0].flags == fmt::kPtSnapshot);
  CHECK(back->pt_data[0].data == a.pt_data[0].data);
  CHECK(back->sideband[0].records == sb.records);
  CHECK(back->Get("perf.per_cpu_mmaps") == "1");
  CHECK(back->Get("perf.have_sched_switch") == "3");
  CHECK(back->Get("capture.mode") == "snapshot");
  CHECK(back->header.features ==
        (fmt::kFeatureImportedPerf | fmt::kFeatureSnapshot | fmt::kFeaturePerCpu));
}

TEST_CASE("export refuses archives perf.data cannot express") {
  fmt::Archive a;
  a.path = "x.ptar";
  auto none = fmt::ExportPerfDataToBytes(a);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().message ==
        "export-perf: x.ptar: the archive holds no PT data chunks; nothing to export");
  a.pt_data.push_back(Piece(0, 0, 0, 0, 8, 0, 0));
  a.pt_data.push_back(Piece(1, -1, 5, 0, 8, 0, 0));
  auto mixed = fmt::ExportPerfDataToBytes(a);
  REQUIRE_FALSE(mixed.has_value());
  CHECK(mixed.error().message ==
        "export-perf: x.ptar: PT data mixes per-CPU (cpu >= 0) and per-thread (cpu -1) streams; "
        "perf.data holds one kind");
}

TEST_CASE("foreign and damaged files give one exact error naming file and offset") {
  const auto good = Exported(ThreadArchive());
  const uint64_t data_offset = Le(good, 40), data_size = Le(good, 48);
  const uint64_t table = data_offset + data_size;
  CHECK(ImportError({}) == "t.data: offset 0: file is 0 bytes, too short for a perf.data header");
  std::vector<uint8_t> junk(64);
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<uint8_t>(i * 37 + 11);
  CHECK(ImportError(junk) == "t.data: offset 0: not a perf.data file (magic is not 'PERFILE2')");
  std::vector<uint8_t> pipe(good.begin(), good.begin() + 16);
  PutLe(pipe, 8, 16, 8);
  CHECK(ImportError(pipe) ==
        "t.data: offset 8: pipe-mode perf.data (header size 16) is not supported; record to a "
        "file with 'perf record -o FILE' instead of a pipe");
  std::vector<uint8_t> swapped = good;
  std::memcpy(swapped.data(), "2ELIFREP", 8);
  CHECK(ImportError(swapped) ==
        "t.data: offset 0: big-endian perf.data (magic '2ELIFREP') is not supported; convert it "
        "on a big-endian host with 'perf inject'");
  auto cut = [&](size_t n) { return std::vector<uint8_t>(good.begin(), good.begin() + n); };
  CHECK(ImportError(cut(50)) == "t.data: offset 50: file is 50 bytes, shorter than the 104-byte "
                                "perf.data header; the file is truncated");
  CHECK(ImportError(cut(200)) == "t.data: offset 24: the attrs section [112, +144) runs past the "
                                 "end of the file (200 bytes); the file is truncated");
  // Cut before the AUXTRACE_INFO record ends: nothing to decode.
  CHECK(ImportError(cut(300)) == "t.data: offset 256: record type 70 of 152 bytes runs past the "
                                 "end of the data: the file is truncated; no Intel PT data before "
                                 "it (no AUXTRACE_INFO record)");
  CHECK(data_size > 300);
  // Cut inside the feature table: every record is there, the features from the cut on are not.
  auto no_features = fmt::ImportPerfDataFromBytes(cut(table + 8), "t.data");
  REQUIRE(no_features.has_value());
  CHECK_FALSE(no_features->complete);
  REQUIRE(no_features->damage.size() == 1);
  CHECK(no_features->damage[0].reason ==
        "offset " + std::to_string(table) + ": the feature section table runs past the end of "
        "the file at feature 2: the file is truncated; the features from there on are left out");
  CHECK(no_features->pt_data.size() == 3);
  std::vector<uint8_t> tiny = good;
  PutLe(tiny, data_offset + 6, 4, 2);
  CHECK(ImportError(tiny) == "t.data: offset 256: record type 70 has size 4 < 8: the records "
                             "after it cannot be found; no Intel PT data before it (no "
                             "AUXTRACE_INFO record)");
  std::vector<uint8_t> no_pt = good;
  PutLe(no_pt, data_offset, 68, 4);  // AUXTRACE_INFO -> FINISHED_ROUND
  CHECK(ImportError(no_pt) ==
        "t.data: offset 256: no Intel PT data in this perf.data (no AUXTRACE_INFO record in the "
        "data section); record with 'perf record -e intel_pt//u'");
  std::vector<uint8_t> other_pmu = good;
  PutLe(other_pmu, data_offset + 8, 3, 4);  // AUXTRACE_INFO.type 3 (ARM SPE/CoreSight family)
  CHECK(ImportError(other_pmu) == "t.data: offset 256: AUXTRACE_INFO type 3 is not Intel PT (1); "
                                  "only intel_pt captures can be imported");
}

TEST_CASE("an AUXTRACE payload past the end of the data: the trace up to there, marked cut") {
  auto b = Exported(ThreadArchive());
  // The first AUXTRACE record follows AUXTRACE_INFO (152), TIME_CONV (56) and the sideband.
  const size_t at = Le(b, 40) + 152 + 56 + ThreadSideband().size();
  const size_t data_end = Le(b, 40) + Le(b, 48);
  REQUIRE(Le(b, at, 4) == 71);
  PutLe(b, at + 8, 1u << 30, 8);
  auto back = fmt::ImportPerfDataFromBytes(b, "t.data");
  REQUIRE(back.has_value());
  CHECK_FALSE(back->complete);
  REQUIRE(back->damage.size() == 1);
  CHECK(back->damage[0].code == ptscope::Errc::kTruncated);
  CHECK(back->damage[0].offset == at);
  CHECK(back->damage[0].end == data_end);
  CHECK(back->damage[0].reason ==
        "offset " + std::to_string(at) + ": AUXTRACE record announces 1073741824 bytes of trace "
        "but the data ends after " + std::to_string(data_end - at - 48) +
        ": the file is truncated (the trace up to the cut is decoded)");
  // Everything up to the end of the data section became its trace bytes, flagged cut.
  REQUIRE(back->pt_data.size() == 1);
  CHECK(back->pt_data[0].data.size() == data_end - at - 48);
  CHECK(back->pt_data[0].flags == fmt::kPtTruncated);
  CHECK(std::vector<uint8_t>(back->pt_data[0].data.begin(), back->pt_data[0].data.begin() + 13) ==
        std::vector<uint8_t>(13, 0x11));
}

TEST_CASE("unknown feature sections are skipped") {
  auto b = Exported(ThreadArchive());
  uint64_t bits = Le(b, 72);
  bits &= ~(1ull << 18);  // AUXTRACE index (the last section) ...
  PutLe(b, 72, bits, 8);
  PutLe(b, 80, 1ull << 36, 8);  // ... becomes feature 100, which we do not know
  auto back = fmt::ImportPerfDataFromBytes(b, "f.data");
  REQUIRE(back.has_value());
  CHECK(back->pt_data.size() == 3);
  CHECK(back->Get("host.name") == "h1");
}

TEST_CASE("every single-byte corruption imports or fails with a located error, never crashes") {
  const auto good = Exported(ThreadArchive());
  size_t failures = 0;
  for (size_t at = 0; at < good.size(); ++at) {
    for (uint8_t value : {uint8_t{0}, uint8_t{0xff}, static_cast<uint8_t>(good[at] + 1)}) {
      std::vector<uint8_t> b = good;
      b[at] = value;
      auto r = fmt::ImportPerfDataFromBytes(std::move(b), "m.data");
      if (r.has_value()) continue;
      ++failures;
      INFO("byte " << at << " = " << int(value) << ": " << r.error().message);
      CHECK(r.error().message.rfind("m.data: offset ", 0) == 0);
      CHECK(r.error().message.find('\n') == std::string::npos);
    }
  }
  CHECK(failures > 0);
}

TEST_CASE("export of an imported export reproduces the perf.data byte for byte") {
  const auto first = Exported(ThreadArchive());
  auto imported = fmt::ImportPerfDataFromBytes(first, "a.data");
  REQUIRE(imported.has_value());
  CHECK(Exported(*imported) == first);
}

TEST_CASE("TIME_CONV supplies the conversion when AUXTRACE_INFO has none") {
  auto b = Exported(ThreadArchive());
  const size_t info = Le(b, 40);
  PutLe(b, info + 16 + 8 * 2, 0, 8);       // priv[TIME_MULT] = 0
  const size_t tc = info + 152;            // TIME_CONV follows AUXTRACE_INFO
  REQUIRE(Le(b, tc, 4) == 79);
  PutLe(b, tc + 8, 7, 8);                  // time_shift
  PutLe(b, tc + 16, 333, 8);               // time_mult
  PutLe(b, tc + 24, 44, 8);                // time_zero
  auto back = fmt::ImportPerfDataFromBytes(b, "tc.data");
  REQUIRE(back.has_value());
  CHECK(back->Get("time.shift") == "7");
  CHECK(back->Get("time.mult") == "333");
  CHECK(back->Get("time.zero") == "44");
  CHECK(back->Get("time.cap_user_time_zero") == "1");
}

// perf.data salvage, as perf script does it: a file cut anywhere after its AUXTRACE_INFO record
// imports every record that ends before the cut and the trace bytes up to it, and says where it
// stopped. The records are found by walking the file's bytes here (PERF_DATA.md §4), apart from
// the reader under test.
TEST_CASE("a perf.data cut at any byte imports everything before the cut") {
  const std::vector<uint8_t> good = Exported(ThreadArchive());
  const uint64_t data_offset = Le(good, 40), data_end = data_offset + Le(good, 48);
  struct Seen {
    uint64_t end;          // where the record (with its trace bytes) ends
    bool sideband;         // a kernel record, copied to the Sideband chunks
    uint64_t trace_at = 0, trace_size = 0;  // AUXTRACE: its trace bytes
  };
  std::vector<Seen> records;
  for (uint64_t at = data_offset; at < data_end;) {
    const uint32_t type = static_cast<uint32_t>(Le(good, at, 4));
    const uint64_t size = Le(good, at + 6, 2);
    Seen seen{at + size, type < 64 && type != 9};
    if (type == 71) {
      seen.trace_at = at + size;
      seen.trace_size = Le(good, at + 8);
      seen.end += seen.trace_size;
    }
    records.push_back(seen);
    at = seen.end;
  }
  REQUIRE(records.size() == 10);  // AUXTRACE_INFO, TIME_CONV, 5 kernel records, 3 AUXTRACE
  auto count_records = [](const fmt::Archive& a) {
    size_t n = 0;
    for (const auto& chunk : a.sideband) {
      perf::RecordIterator it(chunk.records, perf::RecordLayout{0x10087, true});
      while (auto r = it.Next()) {
        REQUIRE(r->has_value());
        ++n;
      }
    }
    return n;
  };
  for (uint64_t cut = records[0].end; cut <= good.size(); ++cut) {
    CAPTURE(cut);
    auto back = fmt::ImportPerfDataFromBytes(
        std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(cut)), "cut.data");
    REQUIRE(back.has_value());
    size_t sideband = 0;
    uint64_t trace = 0;
    for (const Seen& r : records) {
      if (r.end <= cut && r.sideband) ++sideband;
      if (r.trace_size != 0 && r.trace_at <= cut) trace += std::min(r.trace_size, cut - r.trace_at);
    }
    CHECK(count_records(*back) == sideband);
    uint64_t imported = 0;
    for (const auto& piece : back->pt_data) imported += piece.data.size();
    CHECK(imported == trace);
    // Complete only uncut; a cut in the data names its offset, one past it says the features
    // (build ids, host, CPU) are missing.
    CHECK(back->complete == (cut == good.size()));
    if (cut < data_end) {  // one damage: where the records stop
      REQUIRE(back->damage.size() == 1);
      CHECK(back->damage[0].code == ptscope::Errc::kTruncated);
      CHECK(back->damage[0].reason.find("the file is truncated") != std::string::npos);
      CHECK(back->damage[0].offset <= cut);
    } else if (cut < good.size()) {  // every record; a feature (or two) cut
      REQUIRE_FALSE(back->damage.empty());
      for (const auto& d : back->damage) {
        CHECK(d.code == ptscope::Errc::kTruncated);
        CHECK(d.offset >= data_end);
        CAPTURE(d.reason);
        CHECK(d.reason.find("left out") != std::string::npos);
      }
    }
  }
}

TEST_CASE("impossible time conversions are refused where they are read, naming the record") {
  auto b = Exported(ThreadArchive());
  const size_t info = Le(b, 40);
  const std::string advice =
      " (the capture's time conversion is damaged; pt-archive info lists the metadata)";
  auto bad_info = b;
  PutLe(bad_info, info + 16 + 8 * 1, 64, 8);  // priv[TIME_SHIFT] = 64: undefined behaviour
  CHECK(ImportError(bad_info) == "t.data: offset " + std::to_string(info) +
                                     " (AUXTRACE_INFO record): metadata time.shift=64 is out of "
                                     "range (0..63)" + advice);
  // A TIME_CONV whose 2^32 mult perf would truncate to 0 and divide by.
  auto bad_tc = b;
  PutLe(bad_tc, info + 16 + 8 * 2, 0, 8);  // priv[TIME_MULT] = 0: TIME_CONV is used
  const size_t tc = info + 152;
  REQUIRE(Le(bad_tc, tc, 4) == 79);
  PutLe(bad_tc, tc + 16, uint64_t{1} << 32, 8);
  CHECK(ImportError(bad_tc) == "t.data: offset " + std::to_string(tc) +
                                   " (TIME_CONV record): metadata time.mult=4294967296 does not "
                                   "fit perf's 32-bit time_mult (at most 4294967295)" + advice);
  // The good file's conversion is what Archive::time holds.
  auto good = fmt::ImportPerfDataFromBytes(b, "t.data");
  REQUIRE(good.has_value());
  REQUIRE(good->time);
  CHECK(good->time->perf.shift == 10);
  CHECK(good->time->perf.mult == 1024);
  CHECK(good->time->perf.zero == 5);
}

TEST_CASE("export-perf without a recorded conversion keeps perf's mult within 1..2^32-1") {
  for (const char* ghz : {"1e-300", "1e300", "nan", "-3"}) {
    CAPTURE(ghz);
    fmt::Archive a = ThreadArchive();
    std::erase_if(a.metadata, [](const auto& kv) { return kv.first.rfind("time.", 0) == 0; });
    a.metadata.emplace_back("emulate.virtual_ghz", ghz);
    a.time.reset();
    auto back = fmt::ImportPerfDataFromBytes(Exported(a), "t.data");
    REQUIRE(back.has_value());
    REQUIRE(back->time);
    const double expected = std::string(ghz) == "1e-300" ? 4294967295.0
                            : std::string(ghz) == "1e300" ? 1.0 : 1024.0;
    CHECK(back->time->perf.mult == expected);
  }
}

TEST_CASE("a perf.data read in place: the archive as read whole, with the trace left in the file") {
  const fmt::Archive in = ThreadArchive();
  const auto bytes = Exported(in);
  TempFile file(bytes);
  auto whole = fmt::ImportPerfDataFromBytes(bytes, file.path);
  auto eager = fmt::ImportPerfData(file.path);
  auto lazy = fmt::ImportPerfData(file.path, fmt::ReadOptions{.keep_pt_bytes = false});
  REQUIRE(whole.has_value());
  REQUIRE(eager.has_value());
  REQUIRE(lazy.has_value());
  // Read from the file, the trace bytes are those of the buffer import.
  CHECK(Exported(*eager) == bytes);
  REQUIRE(eager->pt_data.size() == 3);
  CHECK(eager->pt_refs.empty());
  REQUIRE(lazy->pt_data.size() == 3);
  REQUIRE(lazy->pt_refs.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const fmt::PtDataChunk& got = lazy->pt_data[i];
    const fmt::PtDataChunk& want = whole->pt_data[i];
    CHECK(want.data == Padded(in.pt_data[i].data));
    CHECK(got.data.empty());
    CHECK(lazy->pt_refs[i].raw);
    CHECK(lazy->pt_refs[i].size == want.data.size());
    CHECK(FileBytes(file.path, lazy->pt_refs[i].chunk_offset, lazy->pt_refs[i].size) == want.data);
    CHECK(got.stream_id == want.stream_id);
    CHECK(got.stream_offset == want.stream_offset);
    CHECK(got.reference_tsc == want.reference_tsc);
    CHECK(got.flags == want.flags);
    CHECK(got.tid == want.tid);
    CHECK(got.pid == want.pid);
    CHECK(got.cpu == want.cpu);
    CHECK(got.bytes_lost_before == want.bytes_lost_before);
  }
  // The first payload follows its 48-byte AUXTRACE record: AUXTRACE_INFO (152), TIME_CONV (56)
  // and the sideband come first in the data section.
  CHECK(lazy->pt_refs[0].chunk_offset == Le(bytes, 40) + 152 + 56 + ThreadSideband().size() + 48);
  CHECK(lazy->metadata == whole->metadata);
  REQUIRE(lazy->sideband.size() == whole->sideband.size());
  CHECK(lazy->sideband[0].records == whole->sideband[0].records);
  REQUIRE(lazy->modules.size() == 1);
  CHECK(lazy->modules[0].path == "/opt/prog");
  CHECK(lazy->modules[0].build_id == kBuildId);
}

TEST_CASE("an imported perf.data is written piece by piece; one that shrank since is an error") {
  // What pt-archive import-perf does: import with the trace left in the file, then write the
  // .ptar, reading each piece just before it is written.
  const auto bytes = Exported(ThreadArchive());
  TempFile file(bytes);
  const std::string out = file.path + ".ptar";
  auto whole = fmt::ImportPerfDataFromBytes(bytes, file.path);
  auto lazy = fmt::ImportPerfData(file.path, fmt::ReadOptions{.keep_pt_bytes = false});
  REQUIRE(whole.has_value());
  REQUIRE(lazy.has_value());
  REQUIRE(lazy->pt_refs.size() == 3);
  REQUIRE(fmt::WriteImportedArchive(*lazy, out, {}));
  auto back = fmt::ReadArchive(out);
  REQUIRE(back.has_value());
  CHECK(back->complete);
  REQUIRE(back->pt_data.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(back->pt_data[i].data == whole->pt_data[i].data);
    CHECK(back->pt_data[i].stream_offset == whole->pt_data[i].stream_offset);
  }
  CHECK(back->sideband.at(0).records == whole->sideband.at(0).records);
  // The perf.data shrinks after the import, 5 bytes into the second piece: the first piece is
  // read whole, the second is an error naming the file and the offset where it now ends.
  const uint64_t cut = lazy->pt_refs[1].chunk_offset + 5;
  REQUIRE(::truncate(file.path.c_str(), static_cast<off_t>(cut)) == 0);
  auto changed = fmt::WriteImportedArchive(*lazy, out, {});
  REQUIRE_FALSE(changed.has_value());
  CHECK(changed.error().code == ptscope::Errc::kIo);
  CHECK(changed.error().message ==
        file.path + ": offset " + std::to_string(cut) +
            ": the file ends there (it changed since it was first read?)");
  // Gone altogether: an error naming it.
  REQUIRE(std::remove(file.path.c_str()) == 0);
  auto gone = fmt::WriteImportedArchive(*lazy, out, {});
  REQUIRE_FALSE(gone.has_value());
  CHECK(gone.error().message ==
        file.path + ": cannot open again to read its trace: " +
            std::string(std::strerror(ENOENT)));
  std::remove(out.c_str());
}

TEST_CASE("a perf.data on disk gives the errors its bytes give, naming the file") {
  const auto good = Exported(ThreadArchive());
  // Truncated (inside the header, the attrs, the data section), foreign, wrong version, pipe
  // mode, and a damaged record in the data section (read through the window).
  std::vector<std::vector<uint8_t>> bad;
  for (size_t cut : {size_t{50}, size_t{200}, size_t{300}}) bad.emplace_back(good.begin(), good.begin() + cut);
  bad.push_back(std::vector<uint8_t>(64, 0x5a));
  bad.push_back(good);
  std::memcpy(bad.back().data(), "2ELIFREP", 8);
  bad.push_back(good);
  std::memcpy(bad.back().data(), "PERFFILE", 8);
  bad.emplace_back(good.begin(), good.begin() + 16);
  PutLe(bad.back(), 8, 16, 8);
  bad.push_back(good);
  PutLe(bad.back(), Le(good, 40) + 6, 4, 2);  // the first record's size: 4 < 8
  for (size_t i = 0; i < bad.size(); ++i) {
    CAPTURE(i);
    TempFile file(bad[i]);
    auto from_file = fmt::ImportPerfData(file.path, fmt::ReadOptions{.keep_pt_bytes = false});
    auto from_bytes = fmt::ImportPerfDataFromBytes(bad[i], file.path);
    REQUIRE_FALSE(from_file.has_value());
    REQUIRE_FALSE(from_bytes.has_value());
    CHECK(from_file.error().message == from_bytes.error().message);
    CHECK(from_file.error().message.rfind(file.path + ": offset ", 0) == 0);
  }
  auto missing = fmt::ImportPerfData("/nonexistent/ptscope.data");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().message ==
        "/nonexistent/ptscope.data: cannot open: No such file or directory");
  auto directory = fmt::ImportPerfData("/tmp");
  REQUIRE_FALSE(directory.has_value());
  CHECK(directory.error().message ==
        "/tmp: not a regular file; perf.data is read in place (copy it to a file first)");
}

TEST_CASE("an attr ids or feature section larger than any perf writes is not read") {
  // Inside the file (64 MiB of padding after it), so that only the size bound can refuse them.
  std::vector<uint8_t> big = Exported(ThreadArchive());
  const uint64_t end = big.size(), huge = 65u << 20;
  const uint64_t table = Le(big, 40) + Le(big, 48);  // feature table: bits 2, 3 (hostname), ...
  big.resize(end + huge);
  std::vector<uint8_t> ids = big;
  PutLe(ids, 240, end, 8);
  PutLe(ids, 248, huge, 8);
  CHECK(ImportError(std::move(ids)) == "t.data: offset 240: attr ids section of " +
                                           std::to_string(huge) +
                                           " bytes is larger than any perf writes");
  // A feature is not needed to decode: it is left out (damage), the rest imported.
  PutLe(big, table + 16, end, 8);
  PutLe(big, table + 24, huge, 8);
  auto back = fmt::ImportPerfDataFromBytes(std::move(big), "t.data");
  REQUIRE(back.has_value());
  CHECK(back->Get("host.name") == std::nullopt);
  CHECK(back->Get("kernel.release") == "6.1.0-test");
  REQUIRE(back->damage.size() == 1);
  CHECK(back->damage[0].code == ptscope::Errc::kCorrupt);
  CHECK(back->damage[0].reason == "offset " + std::to_string(end) + ": feature 3 section of " +
                                      std::to_string(huge) +
                                      " bytes is larger than any perf writes; feature 3 is left out");
}

TEST_CASE("attrs sharing one ids table are refused once their ids outgrow the file") {
  // 400 attrs all naming one 64 KiB ids table: each would load it again (a 4 MB file of this
  // shape took 3.3 GB). The table and the attrs are appended; the header points at them.
  const std::vector<uint8_t> good = Exported(ThreadArchive());
  const uint64_t attr_size = Le(good, 16), attrs_at = Le(good, 24), table_bytes = 65536;
  REQUIRE(Le(good, 32) == attr_size);  // one attr
  std::vector<uint8_t> shared = good;
  const uint64_t table_at = shared.size();
  shared.resize(table_at + table_bytes, 0);
  const uint64_t new_attrs_at = shared.size();
  for (int i = 0; i < 400; ++i) {
    shared.insert(shared.end(), good.begin() + attrs_at, good.begin() + attrs_at + attr_size);
    PutLe(shared, shared.size() - 16, table_at, 8);
    PutLe(shared, shared.size() - 8, table_bytes, 8);
  }
  PutLe(shared, 24, new_attrs_at, 8);
  PutLe(shared, 32, 400 * attr_size, 8);
  const uint64_t file_size = shared.size();
  const uint64_t first_over = file_size / table_bytes;  // 0-based: the attr that outgrows it
  CHECK(ImportError(shared) ==
        "t.data: offset " + std::to_string(new_attrs_at + first_over * attr_size + attr_size - 16) +
            ": the attrs' ids sections add up to " + std::to_string((first_over + 1) * table_bytes) +
            " bytes, more than the file's " + std::to_string(file_size) +
            ": they overlap, which perf never writes (the file is damaged)");
}

TEST_CASE("a sideband larger than the parser's read window is kept whole and in order") {
  // 40000 COMM records (each 40 bytes here) span several 1 MiB windows and arena blocks.
  fmt::Archive a = ThreadArchive();
  std::vector<uint8_t> many;
  for (uint32_t i = 0; i < 40000; ++i) {
    perf::CommRecord comm{100, 100, "t" + std::to_string(i % 1000), false};
    auto r = Rec(perf::kRecordComm, 0, comm, 100, 100, 100 + i);
    many.insert(many.end(), r.begin(), r.end());
  }
  a.sideband[0].records.insert(a.sideband[0].records.end(), many.begin(), many.end());
  const auto bytes = Exported(a);
  REQUIRE(bytes.size() > (2u << 20));
  TempFile file(bytes);
  auto lazy = fmt::ImportPerfData(file.path, fmt::ReadOptions{.keep_pt_bytes = false});
  auto whole = fmt::ImportPerfDataFromBytes(bytes, file.path);
  REQUIRE(lazy.has_value());
  REQUIRE(whole.has_value());
  std::vector<uint8_t> lazy_records, whole_records;
  for (const auto& c : lazy->sideband) lazy_records.insert(lazy_records.end(), c.records.begin(), c.records.end());
  for (const auto& c : whole->sideband) whole_records.insert(whole_records.end(), c.records.begin(), c.records.end());
  CHECK(lazy_records == a.sideband[0].records);
  CHECK(whole_records == a.sideband[0].records);
}

TEST_CASE("export of an archive read without its PT bytes fetches each piece from the file") {
  const fmt::Archive in = ThreadArchive();
  char name[] = "/tmp/ptscope-export-XXXXXX";
  int fd = ::mkstemp(name);
  REQUIRE(fd >= 0);
  ::close(fd);
  const std::string path = std::string(name) + ".ptar";
  std::rename(name, path.c_str());
  {
    auto writer = fmt::ArchiveWriter::Create(path);
    REQUIRE(writer);
    REQUIRE((*writer)->Write(fmt::MetadataChunk{in.metadata}));
    for (const auto& c : in.sideband_attrs) REQUIRE((*writer)->Write(c));
    for (const auto& c : in.sideband) REQUIRE((*writer)->Write(c));
    for (const auto& c : in.modules) REQUIRE((*writer)->Write(c));
    for (const auto& c : in.pt_data) REQUIRE((*writer)->Write(c));
    REQUIRE((*writer)->Close());
  }
  auto whole = fmt::ReadArchive(path);
  auto light = fmt::ReadArchive(path, fmt::ReadOptions{.keep_pt_bytes = false});
  REQUIRE(whole);
  REQUIRE(light);
  for (const auto& c : light->pt_data) CHECK(c.data.empty());
  const auto want = Exported(*whole);
  CHECK(Exported(*light) == want);
  // Written to a file, piece by piece: the same bytes.
  const std::string out = path + ".data";
  REQUIRE(fmt::ExportPerfData(*light, out));
  CHECK(FileBytes(out, 0, want.size()) == want);
  // The archive changes under the export: an error naming it, not other bytes.
  {
    auto writer = fmt::ArchiveWriter::Create(path);
    REQUIRE(writer);
    REQUIRE((*writer)->Write(fmt::MetadataChunk{in.metadata}));
    REQUIRE((*writer)->Close());
  }
  auto changed = fmt::ExportPerfDataToBytes(*light);
  REQUIRE_FALSE(changed.has_value());
  CHECK(changed.error().message.find(path) != std::string::npos);
  std::remove(out.c_str());
  std::remove(path.c_str());
  auto gone = fmt::ExportPerfDataToBytes(*light);  // and once it is gone
  REQUIRE_FALSE(gone.has_value());
  CHECK(gone.error().message.find(path) != std::string::npos);
}

// ---- OpenCapture and ForEachSidebandRecord (ptscope/capture.h) ------------------------------

TEST_CASE("OpenCapture reads a perf.data by its magic, and names a file that is neither") {
  TempFile data(Exported(ThreadArchive()));
  CHECK(fmt::IsPerfData(data.path));
  auto opened = fmt::OpenCapture(data.path);
  REQUIRE(opened.has_value());
  CHECK(opened->pt_data.size() == 3);
  std::vector<uint32_t> types;
  CHECK(fmt::ForEachSidebandRecord(*opened, [&](perf::Record&& r) { types.push_back(r.type); })
            .empty());
  CHECK(types.size() >= 5);  // the five records written, and what the export adds (AUX, ...)

  TempFile junk(std::vector<uint8_t>(64, 0x5a));
  CHECK_FALSE(fmt::IsPerfData(junk.path));
  auto refused = fmt::OpenCapture(junk.path);  // read as an archive, refused as one
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().message.find(junk.path) != std::string::npos);
}

TEST_CASE("ForEachSidebandRecord visits every record in file order and reports what it skips") {
  fmt::Archive a = ThreadArchive();
  fmt::SidebandChunk orphan;  // no SidebandAttr chunk describes attr 9
  orphan.attr_id = 9;
  orphan.records = ThreadSideband();
  a.sideband.push_back(orphan);
  fmt::SidebandChunk cut = a.sideband[0];  // the last record cut short
  cut.records.resize(cut.records.size() - 3);
  a.sideband.push_back(cut);

  std::vector<uint32_t> types;
  auto problems = fmt::ForEachSidebandRecord(a, [&](perf::Record&& r) { types.push_back(r.type); });
  const std::vector<uint32_t> once = {perf::kRecordComm, perf::kRecordMmap2, perf::kRecordFork,
                                      perf::kRecordAux, perf::kRecordExit};
  std::vector<uint32_t> want = once;
  want.insert(want.end(), once.begin(), once.end() - 1);  // chunk 2 up to its cut record
  CHECK(types == want);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].chunk == 1);
  CHECK(problems[0].missing_attr);
  CHECK(problems[0].Describe() ==
        "sideband chunk 1 names attr 9 but no SidebandAttr chunk describes it");
  CHECK(problems[1].chunk == 2);
  CHECK_FALSE(problems[1].missing_attr);
  const size_t last = ThreadSideband().size() -
                      Rec(perf::kRecordExit, 0, perf::TaskRecord{100, 100, 100, 100, 90, true},
                          100, 100, 90).size();
  CHECK(problems[1].offset == last);
  CHECK(problems[1].Describe().rfind("sideband chunk 2 offset " + std::to_string(last) + ": ",
                                     0) == 0);
}

namespace {
// A record as a comparable tuple: type, time, CPU, tid (of its sample_id) and its size.
std::vector<std::tuple<uint32_t, uint64_t, uint32_t, uint32_t>> Records(const fmt::Archive& a) {
  std::vector<std::tuple<uint32_t, uint64_t, uint32_t, uint32_t>> out;
  auto problems = fmt::ForEachSidebandRecord(a, [&](perf::Record&& r) {
    out.emplace_back(r.type, r.sample_id->time, r.sample_id->cpu, r.sample_id->tid);
  });
  CHECK(problems.empty());
  return out;
}
}  // namespace

TEST_CASE("a perf.data's sideband left in the file: ranges in file order, read again skipping "
          "the trace; a file that changed since is a problem naming the range") {
  // 50 rounds of 2 CPUs x 250 switches: 50,002 records of 48 bytes (COMM and MMAP2: 56, 120),
  // ~2.3 MiB: three ranges of at most 1 MiB of records; a 64-byte trace piece after every
  // 10,000th other record.
  const fmt::Archive in = ptscope::testing::PerCpuRoundsArchive(50, 250);
  const auto bytes = ptscope::testing::WithTraceBetweenRecords(Exported(in), 10000);
  TempFile file(bytes);
  auto whole = fmt::ImportPerfDataFromBytes(bytes, file.path);
  auto left = fmt::ImportPerfData(
      file.path, fmt::ReadOptions{.keep_pt_bytes = false, .keep_sideband_bytes = false});
  REQUIRE(whole.has_value());
  REQUIRE(left.has_value());
  CHECK(whole->sideband_ranges.empty());
  REQUIRE(left->sideband_ranges.size() == 3);
  REQUIRE(left->sideband.size() == 3);
  uint64_t records = 0, record_bytes = 0;
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const fmt::Archive::SidebandRange& range = left->sideband_ranges[i];
    CHECK(left->sideband[i].records.empty());
    CHECK(left->sideband[i].attr_id == whole->sideband[0].attr_id);
    CHECK(range.bytes <= (1u << 20));
    if (i > 0) CHECK(range.begin >= left->sideband_ranges[i - 1].end);
    records += range.records;
    record_bytes += range.bytes;
  }
  CHECK(records == 2 + 50 * 2 * 250 * 2);
  CHECK(record_bytes == in.sideband[0].records.size());
  // The first two ranges hold 1 MiB of 48-byte records each, but for the COMM and MMAP2 first.
  CHECK(left->sideband_ranges[0].records == 2 + ((1u << 20) - 56 - 120) / 48);
  CHECK(left->sideband_ranges[1].records == (1u << 20) / 48);
  // Read again: every record in the file's order (the archive's, not time order; the trace
  // pieces between them skipped), and the imports agree on everything else.
  auto in_file_order = Records(in);
  CHECK(Records(*left) == in_file_order);
  auto time_sorted = in_file_order;
  std::stable_sort(time_sorted.begin(), time_sorted.end(),
                   [](const auto& a, const auto& b) { return std::get<1>(a) < std::get<1>(b); });
  CHECK(time_sorted != in_file_order);
  CHECK(Records(*whole) == time_sorted);
  CHECK(left->metadata == whole->metadata);
  REQUIRE(left->pt_data.size() == 6);
  for (size_t i = 0; i < 6; ++i) {
    CHECK(left->pt_data[i].cpu == whole->pt_data[i].cpu);
    CHECK(FileBytes(file.path, left->pt_refs[i].chunk_offset, left->pt_refs[i].size) ==
          whole->pt_data[i].data);
  }
  REQUIRE(left->modules.size() == 1);
  CHECK(left->modules[0].path == "/opt/rounds");

  // A record of range 1 changed since (its size 48 -> 40): range 1 is a problem naming where
  // the walk goes wrong (the next "record" is that one's sample id 1: type 1, size 0); ranges 0
  // and 2 still read.
  std::vector<uint8_t> changed = bytes;
  const uint64_t at = left->sideband_ranges[1].begin + 48 * 5;
  PutLe(changed, at + 6, 40, 2);
  {
    auto [problems, visited, changed_path] = ReadSidebandAgain(*left, changed);
    CHECK(visited == records - left->sideband_ranges[1].records);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].chunk == 1);
    CHECK(problems[0].unread == 1);
    CHECK(problems[0].Describe() ==
          "sideband chunk 1 offset 0: read again from the data section's [" +
              std::to_string(left->sideband_ranges[1].begin) + ", " +
              std::to_string(left->sideband_ranges[1].end) + "): " + changed_path +
              ": offset " + std::to_string(at + 40) +
              ": a record of size 0, not the sideband records read there before; the file "
              "changed since it was read");
  }
  // An AUXTRACE record inside range 0 claiming 2^62 trace bytes: range 0 is the problem, named
  // at that record (the first after 10,000 others: the data section's AUXTRACE_INFO and
  // TIME_CONV, 9,998 sideband records).
  {
    uint64_t aux = left->sideband_ranges[0].begin;
    for (int others = 0; others < 9998; ++others) aux += Le(bytes, aux + 6, 2);
    REQUIRE(Le(bytes, aux, 4) == 71);
    std::vector<uint8_t> claims = bytes;
    PutLe(claims, aux + 8, uint64_t{1} << 62, 8);
    auto [problems, visited, claims_path] = ReadSidebandAgain(*left, claims);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].chunk == 0);
    CHECK(problems[0].Describe().find(claims_path + ": offset " + std::to_string(aux) +
                                      ": an AUXTRACE record's trace runs past the end of the "
                                      "range, not the sideband records") != std::string::npos);
  }
  // A sideband record of range 2 turned into a perf-tool record (type 68, FINISHED_ROUND): the
  // walk skips it and finds one record fewer than the range held.
  {
    std::vector<uint8_t> retyped = bytes;
    PutLe(retyped, left->sideband_ranges[2].begin + 48 * 3, 68, 4);
    auto [problems, visited, retyped_path] = ReadSidebandAgain(*left, retyped);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].chunk == 2);
    const fmt::Archive::SidebandRange& range = left->sideband_ranges[2];
    CHECK(problems[0].Describe() ==
          "sideband chunk 2 offset 0: read again from the data section's [" +
              std::to_string(range.begin) + ", " + std::to_string(range.end) + "): " +
              retyped_path + ": offset " + std::to_string(range.begin) + ": " +
              std::to_string(range.records - 1) + " records of " + std::to_string(range.bytes - 48) +
              " bytes in the range, not the sideband records read there before; the file changed "
              "since it was read");
  }
  // Cut inside range 2 (truncated since): range 2 is the read error naming where the file ends;
  // ranges 0 and 1 still read.
  {
    const uint64_t cut = left->sideband_ranges[2].begin + 1000;
    std::vector<uint8_t> head(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(cut));
    auto [problems, visited, cut_path] = ReadSidebandAgain(*left, head);
    CHECK(visited == left->sideband_ranges[0].records + left->sideband_ranges[1].records);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].chunk == 2);
    CHECK(problems[0].Describe().find(cut_path + ": offset " + std::to_string(cut) +
                                      ": the file ends there") != std::string::npos);
  }
  // Gone: every chunk unread, in one problem.
  const std::string path = file.path;
  fmt::Archive gone = *left;
  gone.path = path + ".gone";
  auto problems = fmt::ForEachSidebandRecord(gone, [](perf::Record&&) {});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].unread == 3);
  CHECK(problems[0].Describe() ==
        "sideband chunk 0 offset 0: cannot read the sideband again (chunks 0 to 2): " + path +
            ".gone: cannot open: No such file or directory");
}
