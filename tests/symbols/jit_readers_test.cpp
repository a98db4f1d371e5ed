// jitdump and perf-map readers, and JitCodeStore over time. Fixtures are built byte by byte here.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "jit_code_store.h"
#include "jitdump_reader.h"
#include "perf_map_reader.h"

using namespace ptscope::symbols;

namespace {

// Writes jitdump bytes little-endian, or big-endian (a file from the other byte order).
struct DumpBuilder {
  std::vector<uint8_t> bytes;
  bool big = false;
  void Put(uint64_t value, int width) {
    for (int i = 0; i < width; ++i) {
      int shift = big ? 8 * (width - 1 - i) : 8 * i;
      bytes.push_back(static_cast<uint8_t>(value >> shift));
    }
  }
  void Str(const std::string& s) { bytes.insert(bytes.end(), s.begin(), s.end()); bytes.push_back(0); }
  void Header(uint64_t flags = 0, uint32_t header_size = 40) {
    Put(0x4A695444, 4); Put(1, 4); Put(header_size, 4); Put(62, 4); Put(0, 4); Put(77, 4);
    Put(5, 8); Put(flags, 8);
    while (bytes.size() < header_size) bytes.push_back(0xAA);
  }
  size_t Prefix(uint32_t id, uint64_t time) {
    size_t at = bytes.size();
    Put(id, 4); Put(0, 4); Put(time, 8);
    return at;
  }
  void Finish(size_t at) {  // patch total_size
    uint64_t size = bytes.size() - at;
    for (int i = 0; i < 4; ++i) bytes[at + 4 + i] = static_cast<uint8_t>(size >> (big ? 8 * (3 - i) : 8 * i));
  }
  void Load(uint64_t time, uint64_t addr, const std::string& name, std::vector<uint8_t> code) {
    size_t at = Prefix(0, time);
    Put(77, 4); Put(78, 4); Put(addr, 8); Put(addr, 8); Put(code.size(), 8); Put(1, 8);
    Str(name);
    bytes.insert(bytes.end(), code.begin(), code.end());
    Finish(at);
  }
  void Move(uint64_t time, uint64_t from, uint64_t to, uint64_t size) {
    size_t at = Prefix(1, time);
    Put(77, 4); Put(78, 4); Put(to, 8); Put(from, 8); Put(to, 8); Put(size, 8); Put(1, 8);
    Finish(at);
  }
};

JitDump Parse(const DumpBuilder& b) {
  auto dump = ParseJitdump(b.bytes.data(), b.bytes.size(), "jit-77.dump");
  REQUIRE(dump);
  return *dump;
}

}  // namespace

TEST_CASE("jitdump: header, LOAD with bytes and DEBUG_INFO, MOVE, UNWINDING_INFO, CLOSE") {
  for (bool big : {false, true}) {
    DumpBuilder b;
    b.big = big;
    b.Header(1, 48);  // ARCH_TIMESTAMP, header longer than 40: total_size is honoured
    size_t at = b.Prefix(2, 90);  // DEBUG_INFO for 0x1000, two entries, the second "same file"
    b.Put(0x1000, 8); b.Put(2, 8);
    b.Put(0x1000, 8); b.Put(10, 4); b.Put(3, 4); b.Str("a.js");
    b.Put(0x1004, 8); b.Put(11, 4); b.Put(0, 4); b.Str("\xff");
    b.Finish(at);
    b.Load(100, 0x1000, "jit_add", {0x55, 0xc3});
    at = b.Prefix(4, 101);  // UNWINDING_INFO: skipped
    b.Put(8, 8); b.Put(0, 8); b.Put(8, 8); b.Put(0, 8);
    b.Finish(at);
    b.Move(200, 0x1000, 0x5000, 2);
    b.Finish(b.Prefix(3, 300));
    JitDump dump = Parse(b);
    CHECK(dump.byte_swapped == big);
    CHECK(dump.arch_timestamp);
    CHECK(dump.pid == 77);
    CHECK(dump.elf_mach == 62);
    CHECK(dump.closed);
    CHECK(dump.skipped_records == 1);
    CHECK(dump.damage.empty());
    REQUIRE(dump.records.size() == 2);
    const JitCodeRecord& load = dump.records[0];
    CHECK(load.kind == JitCodeRecord::Kind::kLoad);
    CHECK(load.timestamp == 100);
    CHECK(load.code_addr == 0x1000);
    CHECK(load.name == "jit_add");
    CHECK(load.code == std::vector<uint8_t>{0x55, 0xc3});
    REQUIRE(load.lines.size() == 2);
    CHECK(load.lines[0].file == "a.js");
    CHECK(load.lines[0].line == 10);
    CHECK(load.lines[0].discriminator == 3);
    CHECK(load.lines[1].file == "a.js");
    CHECK(load.lines[1].address == 0x1004);
    const JitCodeRecord& move = dump.records[1];
    CHECK(move.kind == JitCodeRecord::Kind::kMove);
    CHECK(move.old_code_addr == 0x1000);
    CHECK(move.code_addr == 0x5000);
    CHECK(move.code_size == 2);
  }
}

TEST_CASE("jitdump: bad headers are errors that name the field") {
  DumpBuilder b;
  b.Header();
  std::vector<uint8_t> bad = b.bytes;
  bad[0] = 'X';
  auto r = ParseJitdump(bad.data(), bad.size(), "f.dump");
  REQUIRE(!r);
  CHECK(r.error().message == "f.dump: offset 0: not a jitdump file (magic is not \"JiTD\")");
  r = ParseJitdump(b.bytes.data(), 39, "f.dump");
  REQUIRE(!r);
  CHECK(r.error().message == "f.dump: 39 bytes is shorter than a jitdump header (40)");
  bad = b.bytes;
  bad[4] = 2;
  r = ParseJitdump(bad.data(), bad.size(), "f.dump");
  REQUIRE(!r);
  CHECK(r.error().message == "f.dump: offset 4: jitdump version 2 is not supported (only 1)");
  bad = b.bytes;
  bad[8] = 41;  // header claims more bytes than the file has
  r = ParseJitdump(bad.data(), bad.size(), "f.dump");
  REQUIRE(!r);
  CHECK(r.error().message == "f.dump: offset 8: header total_size 41 is outside 40..40");
}

TEST_CASE("jitdump: a truncated last record is reported, earlier records kept") {
  DumpBuilder b;
  b.Header();
  b.Load(1, 0x1000, "first", {0x90, 0xc3});
  size_t second = b.bytes.size();
  b.Load(2, 0x2000, "second", {0x90, 0x90, 0xc3});
  // 56-byte LOAD prefix+fields, "second\0", 3 code bytes = 66; cut the last byte.
  std::vector<uint8_t> cut(b.bytes.begin(), b.bytes.end() - 1);
  auto dump = ParseJitdump(cut.data(), cut.size(), "j.dump");
  REQUIRE(dump);
  REQUIRE(dump->records.size() == 1);
  CHECK(dump->records[0].name == "first");
  CHECK(dump->damage == "j.dump: offset " + std::to_string(second) +
                            ": truncated record (id 0, 66 bytes, 65 left)");
  // A record whose size field is smaller than its fields: code_size says 100 bytes.
  DumpBuilder c;
  c.Header();
  size_t at = c.Prefix(0, 1);
  c.Put(1, 4); c.Put(1, 4); c.Put(0x10, 8); c.Put(0x10, 8); c.Put(100, 8); c.Put(0, 8); c.Str("x");
  c.Finish(at);
  dump = ParseJitdump(c.bytes.data(), c.bytes.size(), "k.dump");
  REQUIRE(dump);
  CHECK(dump->records.empty());
  CHECK(dump->damage == "k.dump: offset 40: record id 0 (58 bytes) is shorter than its fields");
  // A prefix shorter than 16 bytes, and a size below the prefix.
  DumpBuilder d;
  d.Header();
  d.bytes.resize(50);
  dump = ParseJitdump(d.bytes.data(), d.bytes.size(), "d");
  CHECK(dump->damage == "d: offset 40: truncated record header (10 bytes left)");
  d.bytes.resize(40);
  d.Put(0, 4); d.Put(8, 4); d.Put(0, 8);
  dump = ParseJitdump(d.bytes.data(), d.bytes.size(), "d");
  CHECK(dump->damage == "d: offset 40: record total_size 8 is smaller than its 16-byte prefix");
}

TEST_CASE("perf map: hex forms, names with spaces, bad lines counted") {
  PerfMap map = ParsePerfMap("7f0000001000 40 jit_add\n"
                             "0x7F0000002000 0X20 LazyCompile:*foo bar.js:3\r\n"
                             "\n"
                             "zz 10 nope\n"
                             "7f0000003000 10\n"
                             "ABCDEF 8 Upper::Case  \n",
                             "/tmp/perf-7.map");
  REQUIRE(map.entries.size() == 3);
  CHECK(map.entries[0].start == 0x7f0000001000);
  CHECK(map.entries[0].size == 0x40);
  CHECK(map.entries[0].name == "jit_add");
  CHECK(map.entries[1].start == 0x7f0000002000);
  CHECK(map.entries[1].size == 0x20);
  CHECK(map.entries[1].name == "LazyCompile:*foo bar.js:3");
  CHECK(map.entries[2].start == 0xabcdef);
  CHECK(map.entries[2].name == "Upper::Case");
  CHECK(map.bad_lines == 2);
  CHECK(map.first_bad ==
        "/tmp/perf-7.map:4: not a \"START SIZE name\" line (hex START and SIZE, SIZE > 0)");
}

TEST_CASE("JitCodeStore: regions over time, replacement, move, perf-map fallback") {
  DumpBuilder b;
  b.Header(1);  // TSC timestamps; with no conversion TSC == trace ns
  b.Load(100, 0x1000, "v1", {0x01, 0x02, 0x03, 0x04});
  b.Load(200, 0x1002, "v2", {0x11, 0x12, 0x13, 0x14});  // overlaps v1: v1 ends at 200
  b.Load(150, 0x3000, "mul", {0x21, 0x22});
  b.Move(300, 0x3000, 0x4000, 2);
  JitDump dump = Parse(b);
  JitCodeStore store;
  store.AddJitdump(77, dump, JitTimeMap{});
  PerfMap map = ParsePerfMap("1000 10 map_name\n8000 10 only_in_map\n", "m");
  store.AddPerfMap(77, map);

  uint8_t buf[8] = {};
  CHECK(store.ReadCode(77, 0x1001, 150, buf, 8) == 3);
  CHECK(std::vector<uint8_t>(buf, buf + 3) == std::vector<uint8_t>{0x02, 0x03, 0x04});
  CHECK(store.ReadCode(77, 0x1002, 250, buf, 2) == 2);
  CHECK(std::vector<uint8_t>(buf, buf + 2) == std::vector<uint8_t>{0x11, 0x12});
  CHECK(store.Name(77, 0x1000, 150)->name == "v1");
  CHECK(store.Name(77, 0x1003, 250)->name == "v2");
  CHECK(store.Name(77, 0x1003, 250)->start == 0x1002);
  // Before its load time (clock skew) the nearest region still answers.
  CHECK(store.Name(77, 0x1000, 50)->name == "v1");
  // Moved code: the old place is no longer code after 300 (nearest is the pre-move copy).
  CHECK(store.Name(77, 0x4001, 350)->name == "mul");
  CHECK(store.ReadCode(77, 0x4001, 350, buf, 8) == 1);
  CHECK(buf[0] == 0x22);
  CHECK(store.Lookup(77, 0x3000, 250)->valid_until == 300);
  // Only in the perf map: named, no code.
  auto only = store.Name(77, 0x8004, 0);
  REQUIRE(only);
  CHECK(only->name == "only_in_map");
  CHECK(!only->has_code);
  CHECK(store.ReadCode(77, 0x8004, 0, buf, 8) == 0);
  CHECK(!store.Name(77, 0x9000, 0));
  CHECK(!store.Name(78, 0x1000, 150));
}

TEST_CASE("JitTimeMap: TSC conversion and CLOCK_MONOTONIC through sync pairs") {
  JitTimeMap time;
  time.SetConversion(10, 512, 1000);  // ns = 1000 + tsc/2
  CHECK(time.TscToNs(4000) == 3000);
  time.AddPair(10000, 5000000);   // (tsc, monotonic)
  time.AddPair(20000, 6000000);
  CHECK(time.MonotonicToTsc(5500000) == 15000);
  CHECK(time.MonotonicToTsc(7000000) == 30000);  // extrapolated from the last segment
  CHECK(time.MonotonicToTsc(4000000) == 0);      // before the first pair, clamped at 0
  CHECK(time.MonotonicToNs(5500000) == 1000 + 7500);
  JitTimeMap one;
  one.SetConversion(10, 512, 0);  // 2 TSC ticks per ns
  one.AddPair(100, 1000);
  CHECK(one.MonotonicToTsc(1010) == 120);
}

TEST_CASE("JitTimeMap: extreme TimeSync pairs and conversions clamp instead of overflowing") {
  // mono 0 -> tsc 0, mono 1 -> tsc 2^64-1: extrapolating to the end of the clock multiplies two
  // 64-bit differences (a signed 128-bit product overflowed here).
  JitTimeMap steep;
  steep.AddPair(0, 0);
  steep.AddPair(UINT64_MAX, 1);
  CHECK(steep.MonotonicToTsc(UINT64_MAX) == UINT64_MAX);
  CHECK(steep.MonotonicToTsc(1) == UINT64_MAX);
  CHECK(steep.MonotonicToTsc(0) == 0);
  // Falling: mono 0 -> tsc 2^64-1, mono 2^64-1 -> tsc 0.
  JitTimeMap falling;
  falling.AddPair(UINT64_MAX, 0);
  falling.AddPair(0, UINT64_MAX);
  CHECK(falling.MonotonicToTsc(uint64_t{1} << 63) == (uint64_t{1} << 63) - 1);
  CHECK(falling.MonotonicToTsc(UINT64_MAX) == 0);
  // One pair and the widest conversion allowed (2^63 ticks per ns): 1 ms is more ticks than 64
  // bits hold.
  JitTimeMap one;
  one.SetConversion(63, 1, 0);
  one.AddPair(5, 1000);
  CHECK(one.MonotonicToTsc(1000) == 5);
  CHECK(one.MonotonicToTsc(1001) == 5 + UINT64_MAX / 1000000);  // the rate, clamped to 2^64-1/ms
  CHECK(one.MonotonicToTsc(1000 + 2000000) == UINT64_MAX);
  CHECK(one.MonotonicToTsc(999) == 0);
}

TEST_CASE("JitCodeStore: a chain of moves across the address space keeps its line table") {
  DumpBuilder b;
  b.Header(1);
  size_t at = b.Prefix(2, 90);  // DEBUG_INFO for 0x10: one entry, line 7
  b.Put(0x10, 8); b.Put(1, 8);
  b.Put(0x10, 8); b.Put(7, 4); b.Put(0, 4); b.Str("f.js");
  b.Finish(at);
  b.Load(100, 0x10, "f", {0x90, 0xc3});
  // Two moves up by more than 2^62 each: their sum does not fit a signed 64-bit delta.
  b.Move(200, 0x10, 0x7000000000000000, 2);
  b.Move(300, 0x7000000000000000, 0xe000000000000000, 2);
  b.Move(400, 0xe000000000000000, 0x20, 2);  // and back down, below where it started
  JitCodeStore store;
  store.AddJitdump(77, Parse(b), JitTimeMap{});
  for (auto [address, time] : {std::pair<uint64_t, uint64_t>{0x10, 150},
                               {0x7000000000000000, 250}, {0xe000000000000000, 350},
                               {0x20, 450}}) {
    CAPTURE(address);
    auto name = store.Name(77, address, time);
    REQUIRE(name);
    CHECK(name->name == "f");
    CHECK(name->start == address);
    CHECK(name->file == "f.js");
    CHECK(name->line == 7);
  }
}

TEST_CASE("JitCodeStore::FromArchive: monotonic jitdump times placed through TimeSync pairs") {
  DumpBuilder b;
  b.Header(0);  // CLOCK_MONOTONIC
  b.Load(5000, 0x1000, "old", {0x90, 0xc3});
  b.Load(7000, 0x1000, "new", {0xcc, 0xc3});
  ptscope::format::Archive archive;
  archive.metadata = {{"time.shift", "10"}, {"time.mult", "512"}, {"time.zero", "100"}};
  archive.time = ptscope::format::ParseTimeConversion(archive.metadata, "mem").value();
  ptscope::format::TimeSyncChunk sync;
  sync.tsc_and_clock_ns = {{0, 4000}, {2000, 8000}};  // tsc = (mono - 4000) / 2
  archive.time_syncs.push_back(sync);
  ptscope::format::BlobChunk dump_blob;
  dump_blob.kind = ptscope::format::BlobKind::kJitdump;
  dump_blob.name = "/w/jit-77.dump";
  dump_blob.pid = 77;
  dump_blob.data = b.bytes;
  dump_blob.data.pop_back();  // the second LOAD is cut: reported, the first kept
  archive.blobs.push_back(dump_blob);
  ptscope::format::BlobChunk map_blob;
  map_blob.kind = ptscope::format::BlobKind::kPerfMap;
  map_blob.name = "/tmp/perf-77.map";
  map_blob.pid = 77;
  std::string map_text = "2000 10 mapped\nbad line\n";
  map_blob.data.assign(map_text.begin(), map_text.end());
  archive.blobs.push_back(map_blob);
  std::vector<std::string> notes;
  JitCodeStore store = JitCodeStore::FromArchive(archive, notes);
  REQUIRE(notes.size() == 2);
  CHECK(notes[0] == "jitdump read up to damage: /w/jit-77.dump: offset 102: truncated record "
                    "(id 0, 62 bytes, 61 left)");  // 40 + (56 + 4 + 2)
  CHECK(notes[1] == "/tmp/perf-77.map:2: not a \"START SIZE name\" line (hex START and SIZE, "
                    "SIZE > 0) (1 malformed lines skipped)");
  // mono 5000 -> tsc 500 -> ns 100 + 250 = 350.
  const JitRegion* region = store.Lookup(77, 0x1000, 350);
  REQUIRE(region != nullptr);
  CHECK(region->name == "old");
  CHECK(region->valid_from == 350);
  CHECK(store.Name(77, 0x2004, 0)->name == "mapped");
}
