// perf_event records: exact bytes of hand-assembled records (from the uapi layouts), round trips
// of every typed record under several sample_id layouts, and malformed input.
#include "ptscope/perf_records.h"

#include <doctest/doctest.h>

namespace ptscope::perf {
namespace {

constexpr uint64_t kConventionSampleType = 0x10086;  // TID|TIME|CPU|IDENTIFIER

void Put(std::vector<uint8_t>& v, uint64_t value, size_t n) {
  for (size_t i = 0; i < n; ++i) v.push_back(i < 8 ? static_cast<uint8_t>(value >> (8 * i)) : 0);
}
void PutStr(std::vector<uint8_t>& v, std::string_view s, size_t padded) {
  v.insert(v.end(), s.begin(), s.end());
  v.resize(v.size() + padded - s.size(), 0);
}
void PutTrailer(std::vector<uint8_t>& v, uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu,
                uint64_t identifier) {
  Put(v, pid, 4);
  Put(v, tid, 4);
  Put(v, time, 8);
  Put(v, cpu, 4);
  Put(v, 0, 4);
  Put(v, identifier, 8);
}

const RecordLayout kConvention{kConventionSampleType, true};

TEST_CASE("COMM exec record has the kernel's exact bytes") {
  std::vector<uint8_t> want;
  Put(want, 3, 4);        // PERF_RECORD_COMM
  Put(want, 0x2000, 2);   // COMM_EXEC
  Put(want, 56, 2);
  Put(want, 100, 4);
  Put(want, 101, 4);
  PutStr(want, "ls", 8);  // "ls\0" padded to 8
  PutTrailer(want, 100, 101, 0x1000, 2, 0x77);
  REQUIRE(want.size() == 56);

  Record r;
  r.body = CommRecord{100, 101, "ls", true};
  r.sample_id = SampleId{100, 101, 0x1000, 0x77, 0, 2};
  CHECK(BuildRecord(r, kConvention) == want);

  uint16_t size = 0;
  auto parsed = ParseRecord(want, kConvention, &size);
  REQUIRE(parsed);
  CHECK(size == 56);
  CHECK(parsed->type == 3);
  CHECK(parsed->misc == 0x2000);
  const auto& comm = std::get<CommRecord>(parsed->body);
  CHECK(comm.pid == 100);
  CHECK(comm.tid == 101);
  CHECK(comm.comm == "ls");
  CHECK(comm.exec);
  REQUIRE(parsed->sample_id);
  CHECK(parsed->sample_id->pid == 100);
  CHECK(parsed->sample_id->tid == 101);
  CHECK(parsed->sample_id->time == 0x1000);
  CHECK(parsed->sample_id->cpu == 2);
  CHECK(parsed->sample_id->id == 0x77);
}

TEST_CASE("MMAP2 with a build id has the kernel's exact bytes") {
  std::vector<uint8_t> want;
  Put(want, 10, 4);
  Put(want, 0x4000 | 2, 2);  // MMAP_BUILD_ID | user
  Put(want, 120, 2);
  Put(want, 7, 4);
  Put(want, 8, 4);
  Put(want, 0x400000, 8);
  Put(want, 0x1000, 8);
  Put(want, 0x2000, 8);
  Put(want, 4, 1);            // build_id_size
  Put(want, 0, 1);
  Put(want, 0, 2);
  for (uint8_t b : {0xde, 0xad, 0xbe, 0xef}) Put(want, b, 1);
  Put(want, 0, 16);           // rest of build_id[20]
  Put(want, 5, 4);            // prot
  Put(want, 2, 4);            // flags
  PutStr(want, "/bin/true", 16);
  PutTrailer(want, 7, 8, 99, 0, 1);
  REQUIRE(want.size() == 120);

  MmapRecord m;
  m.pid = 7;
  m.tid = 8;
  m.addr = 0x400000;
  m.len = 0x1000;
  m.pgoff = 0x2000;
  m.build_id = {0xde, 0xad, 0xbe, 0xef};
  m.prot = 5;
  m.flags = 2;
  m.filename = "/bin/true";
  Record r;
  r.misc = 2;
  r.body = m;
  r.sample_id = SampleId{7, 8, 99, 1, 0, 0};
  CHECK(BuildRecord(r, kConvention) == want);

  auto parsed = ParseRecord(want, kConvention);
  REQUIRE(parsed);
  const auto& got = std::get<MmapRecord>(parsed->body);
  CHECK(got.is_mmap2);
  CHECK(got.addr == 0x400000);
  CHECK(got.len == 0x1000);
  CHECK(got.pgoff == 0x2000);
  CHECK(got.build_id == std::vector<uint8_t>{0xde, 0xad, 0xbe, 0xef});
  CHECK(got.prot == 5);
  CHECK(got.flags == 2);
  CHECK(got.filename == "/bin/true");
}

TEST_CASE("a filename filling its 8-byte slot still gets a NUL and a full pad") {
  Record r;
  MmapRecord m;
  m.is_mmap2 = false;
  m.filename = "12345678";  // 8 chars + NUL -> 16 bytes
  r.body = m;
  std::vector<uint8_t> bytes = BuildRecord(r, RecordLayout{0, false});
  CHECK(bytes.size() == 8 + 32 + 16);
  CHECK(bytes[40 + 8] == 0);
}

std::vector<Record> EveryTypedRecord() {
  std::vector<Record> records;
  auto add = [&records](RecordBody body, uint16_t misc = 2) {
    Record r;
    r.misc = misc;
    r.body = std::move(body);
    r.sample_id = SampleId{11, 12, 13, 14, 15, 3};
    records.push_back(std::move(r));
  };
  MmapRecord mmap;
  mmap.is_mmap2 = false;
  mmap.pid = 1;
  mmap.tid = 2;
  mmap.addr = 3;
  mmap.len = 4;
  mmap.pgoff = 5;
  mmap.filename = "[vdso]";
  add(mmap);
  MmapRecord inode;
  inode.pid = 1;
  inode.addr = 0x7f0000000000;
  inode.maj = 8;
  inode.min = 1;
  inode.ino = 123456;
  inode.ino_generation = 9;
  inode.prot = 5;
  inode.flags = 0x802;
  inode.filename = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  add(inode);
  MmapRecord with_id = inode;
  with_id.build_id = std::vector<uint8_t>(20, 0xab);
  with_id.maj = with_id.min = 0;  // the build id shares the union with the inode fields
  with_id.ino = with_id.ino_generation = 0;
  add(with_id);
  add(CommRecord{5, 6, "a-rather-long-command-name", false});
  add(TaskRecord{20, 10, 21, 11, 5000, false});
  add(TaskRecord{20, 10, 21, 11, 6000, true});
  add(LostRecord{3, 17});
  add(AuxRecord{0x1000, 0x2000, kAuxFlagTruncated | kAuxFlagPartial});
  add(ItraceStartRecord{30, 31});
  add(SwitchRecord{true, true, false, 0, 0});
  add(SwitchRecord{false, false, false, 0, 0});
  add(SwitchRecord{true, false, true, 40, 41});
  Record other;
  other.type = kRecordNamespaces;
  other.body = OtherRecord{{1, 2, 3, 4, 5, 6, 7, 8}};
  other.sample_id = SampleId{11, 12, 13, 14, 15, 3};
  records.push_back(other);
  return records;
}

void CheckSameBody(const RecordBody& a, const RecordBody& b) {
  REQUIRE(a.index() == b.index());
  if (const auto* m = std::get_if<MmapRecord>(&a)) {
    const auto& n = std::get<MmapRecord>(b);
    CHECK(m->is_mmap2 == n.is_mmap2);
    CHECK(m->pid == n.pid);
    CHECK(m->tid == n.tid);
    CHECK(m->addr == n.addr);
    CHECK(m->len == n.len);
    CHECK(m->pgoff == n.pgoff);
    CHECK(m->maj == n.maj);
    CHECK(m->min == n.min);
    CHECK(m->ino == n.ino);
    CHECK(m->ino_generation == n.ino_generation);
    CHECK(m->build_id == n.build_id);
    CHECK(m->prot == n.prot);
    CHECK(m->flags == n.flags);
    CHECK(m->filename == n.filename);
  } else if (const auto* c = std::get_if<CommRecord>(&a)) {
    const auto& d = std::get<CommRecord>(b);
    CHECK(c->pid == d.pid);
    CHECK(c->tid == d.tid);
    CHECK(c->comm == d.comm);
    CHECK(c->exec == d.exec);
  } else if (const auto* t = std::get_if<TaskRecord>(&a)) {
    const auto& u = std::get<TaskRecord>(b);
    CHECK(t->pid == u.pid);
    CHECK(t->ppid == u.ppid);
    CHECK(t->tid == u.tid);
    CHECK(t->ptid == u.ptid);
    CHECK(t->time == u.time);
    CHECK(t->is_exit == u.is_exit);
  } else if (const auto* l = std::get_if<LostRecord>(&a)) {
    CHECK(l->id == std::get<LostRecord>(b).id);
    CHECK(l->lost == std::get<LostRecord>(b).lost);
  } else if (const auto* x = std::get_if<AuxRecord>(&a)) {
    CHECK(x->aux_offset == std::get<AuxRecord>(b).aux_offset);
    CHECK(x->aux_size == std::get<AuxRecord>(b).aux_size);
    CHECK(x->flags == std::get<AuxRecord>(b).flags);
  } else if (const auto* i = std::get_if<ItraceStartRecord>(&a)) {
    CHECK(i->pid == std::get<ItraceStartRecord>(b).pid);
    CHECK(i->tid == std::get<ItraceStartRecord>(b).tid);
  } else if (const auto* s = std::get_if<SwitchRecord>(&a)) {
    const auto& t2 = std::get<SwitchRecord>(b);
    CHECK(s->out == t2.out);
    CHECK(s->preempt == t2.preempt);
    CHECK(s->cpu_wide == t2.cpu_wide);
    CHECK(s->next_prev_pid == t2.next_prev_pid);
    CHECK(s->next_prev_tid == t2.next_prev_tid);
  } else {
    CHECK(std::get<OtherRecord>(a).body == std::get<OtherRecord>(b).body);
  }
}

TEST_CASE("every typed record round-trips under several sample_id layouts") {
  const RecordLayout layouts[] = {
      kConvention,
      RecordLayout{kSampleTid | kSampleTime | kSampleId | kSampleStreamId | kSampleCpu, true},
      RecordLayout{kConventionSampleType, false},
  };
  for (const RecordLayout& layout : layouts) {
    CAPTURE(layout.sample_type);
    CAPTURE(layout.sample_id_all);
    for (const Record& r : EveryTypedRecord()) {
      std::vector<uint8_t> bytes = BuildRecord(r, layout);
      CAPTURE(bytes.size());
      CHECK(bytes.size() % 8 == 0);
      uint16_t size = 0;
      auto parsed = ParseRecord(bytes, layout, &size);
      REQUIRE(parsed);
      CHECK(size == bytes.size());
      CHECK(parsed->misc == (BuildRecord(r, layout)[4] | BuildRecord(r, layout)[5] << 8));
      CheckSameBody(parsed->body, r.body);
      CHECK(parsed->sample_id.has_value() == layout.sample_id_all);
      if (layout.sample_id_all) {
        CHECK(parsed->sample_id->pid == 11);
        CHECK(parsed->sample_id->tid == 12);
        CHECK(parsed->sample_id->time == 13);
        CHECK(parsed->sample_id->id == 14);
        CHECK(parsed->sample_id->cpu == 3);
        bool has_stream = (layout.sample_type & kSampleStreamId) != 0;
        CHECK(parsed->sample_id->stream_id == (has_stream ? 15u : 0u));
      }
    }
  }
}

TEST_CASE("misc bits follow the body") {
  Record out;
  out.body = SwitchRecord{true, true, false, 0, 0};
  std::vector<uint8_t> b = BuildRecord(out, kConvention);
  CHECK((b[4] | b[5] << 8) == 0x6000);  // SWITCH_OUT | SWITCH_OUT_PREEMPT
  Record in;
  in.misc = 0x6000;                     // stale bits are cleared for a switch-in
  in.body = SwitchRecord{false, false, false, 0, 0};
  b = BuildRecord(in, kConvention);
  CHECK((b[4] | b[5] << 8) == 0);
  CHECK(b[0] == kRecordSwitch);
}

TEST_CASE("RecordIterator walks concatenated records and stops at a malformed one") {
  std::vector<uint8_t> stream;
  for (const Record& r : EveryTypedRecord()) {
    std::vector<uint8_t> b = BuildRecord(r, kConvention);
    stream.insert(stream.end(), b.begin(), b.end());
  }
  size_t good = stream.size();
  Put(stream, 3, 4);
  Put(stream, 0, 2);
  Put(stream, 200, 2);  // claims 200 bytes, 8 present
  RecordIterator it(stream, kConvention);
  size_t count = 0;
  std::optional<Result<Record>> next;
  while ((next = it.Next()) && *next) ++count;
  CHECK(count == EveryTypedRecord().size());
  REQUIRE(next);
  REQUIRE(!*next);
  CHECK(it.offset() == good);
  CHECK(next->error().code == Errc::kTruncated);
  CHECK(next->error().message == "perf record at offset " + std::to_string(good) +
                                     ": COMM record (type 3): header field 'size' = 200 but only "
                                     "8 bytes left");
  CHECK(!it.Next());
}

TEST_CASE("malformed records are errors naming the type and field") {
  const RecordLayout none{0, false};
  SUBCASE("short header") {
    std::vector<uint8_t> b = {1, 0, 0, 0, 0};
    auto r = ParseRecord(b, none);
    REQUIRE(!r);
    CHECK(r.error().message ==
          "perf record header: field 'misc' at offset 4 needs 2 bytes, 1 left");
  }
  SUBCASE("size smaller than the header") {
    std::vector<uint8_t> b;
    Put(b, 7, 4);
    Put(b, 0, 2);
    Put(b, 4, 2);
    auto r = ParseRecord(b, none);
    REQUIRE(!r);
    CHECK(r.error().message ==
          "FORK record (type 7): header field 'size' = 4 is smaller than the 8-byte header");
  }
  SUBCASE("FORK body too short") {
    std::vector<uint8_t> b;
    Put(b, 7, 4);
    Put(b, 0, 2);
    Put(b, 24, 2);
    Put(b, 0, 16);
    auto r = ParseRecord(b, none);
    REQUIRE(!r);
    CHECK(r.error().message ==
          "FORK record (type 7): field 'time' at offset 16 needs 8 bytes, 0 left");
  }
  SUBCASE("filename without NUL") {
    std::vector<uint8_t> b;
    Put(b, 1, 4);
    Put(b, 0, 2);
    Put(b, 48, 2);
    Put(b, 0, 32);
    PutStr(b, "abcdefgh", 8);
    auto r = ParseRecord(b, none);
    REQUIRE(!r);
    CHECK(r.error().message == "MMAP record (type 1): field 'filename' is not NUL-terminated");
  }
  SUBCASE("build_id_size above 20") {
    std::vector<uint8_t> b;
    Put(b, 10, 4);
    Put(b, 0x4000, 2);
    Put(b, 80, 2);
    Put(b, 0, 32);
    Put(b, 21, 1);
    Put(b, 0, 23 + 8);
    PutStr(b, "x", 8);
    auto r = ParseRecord(b, none);
    REQUIRE(!r);
    CHECK(r.error().message == "MMAP2 record (type 10): field 'build_id_size' = 21 exceeds 20");
  }
  SUBCASE("record too small for its sample_id") {
    std::vector<uint8_t> b;
    Put(b, 14, 4);  // SWITCH: body is only the trailer
    Put(b, 0, 2);
    Put(b, 16, 2);
    Put(b, 0, 8);
    auto r = ParseRecord(b, kConvention);
    REQUIRE(!r);
    CHECK(r.error().message ==
          "SWITCH record (type 14): size 16 leaves no room for the 32-byte sample_id");
  }
}

}  // namespace
}  // namespace ptscope::perf
