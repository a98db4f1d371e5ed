// RecordSpill: the compact encoding gives back every record exactly (every type, frame kind and
// edge), blocks come back whole wherever they wait (memory within the budget, the file past it),
// and a block the file cannot give back is an error.
#include "stack/record_spill.h"

#include <dirent.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fake_frames.h"
#include "scratch_dir.h"
#include "stack/stack_tracker.h"

namespace ptscope::decode {
namespace {

using Type = SliceRecord::Type;
using Kind = FrameId::Kind;

SliceRecord Rec(Type type, uint64_t t, uint64_t insns, FrameId frame = {}, bool inferred = false,
                const std::string* text = nullptr) {
  SliceRecord r;
  r.time_ns = t;
  r.instructions = insns;
  r.frame = frame;
  r.type = type;
  r.inferred = inferred;
  if (type == Type::kInstant) r.SetText(text);  // an instant has no frame: `frame` is unused
  return r;
}

std::string Show(const SliceRecord& r) {
  const std::string clock = std::to_string(static_cast<int>(r.type)) + (r.inferred ? "*" : "") +
                            " t=" + std::to_string(r.time_ns) + " i=" +
                            std::to_string(r.instructions);
  if (r.type == Type::kInstant) {  // a text and no frame (its address holds the text)
    return clock + " text=" + (r.text() != nullptr ? "'" + *r.text() + "'" : std::string("null"));
  }
  return clock + " k=" + std::to_string(static_cast<int>(r.frame.kind)) + " a=" +
         std::to_string(r.frame.address) + " x=" + std::to_string(r.frame.inline_index);
}

void CheckSame(const std::vector<SliceRecord>& got, const std::vector<SliceRecord>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(Show(got[i]) == Show(want[i]));
  }
}

// Every type, every frame kind, inferred, inline indexes, texts, huge and backward steps of
// time, instructions and address, and runs of the same frame and clock.
std::vector<SliceRecord> EdgeRecords(const std::string* text_a, const std::string* text_b) {
  const FrameId f{.address = 0x401000, .kind = Kind::kFunction};
  std::vector<SliceRecord> r;
  r.push_back(Rec(Type::kBegin, 5, 0, f, true));
  r.push_back(Rec(Type::kBegin, 5, 0, f));  // same frame and clock, not inferred
  r.push_back(Rec(Type::kEnd, 5, 0, f));
  r.push_back(Rec(Type::kBegin, 6, 3, {.address = 0x400010, .kind = Kind::kFunction}));  // down
  r.push_back(Rec(Type::kBegin, 6, 3, {.address = 0x400010, .inline_index = 0, .kind = Kind::kInlined}));
  r.push_back(Rec(Type::kBegin, 6, 3, {.address = 0x400010, .inline_index = 1, .kind = Kind::kInlined}));
  r.push_back(Rec(Type::kBegin, 6, 3, {.address = 0x400010, .inline_index = UINT32_MAX, .kind = Kind::kInlined}));
  r.push_back(Rec(Type::kEnd, 6, 3, {.address = 0x400010, .inline_index = UINT32_MAX, .kind = Kind::kInlined}));
  r.push_back(Rec(Type::kEnd, 7, 3, {.address = 0x400010, .kind = Kind::kFunction}));  // time only
  r.push_back(Rec(Type::kEnd, 7, 9, {.address = 0x400010, .kind = Kind::kFunction}));  // insns only
  for (Kind kind : {Kind::kSyscall, Kind::kUntraced, Kind::kGap, Kind::kTrigger, Kind::kFolded}) {
    r.push_back(Rec(Type::kBegin, 8, 10, {.address = 0x12, .kind = kind}));
    r.push_back(Rec(Type::kEnd, 8, 10, {.address = 0x12, .kind = kind}));
  }
  r.push_back(Rec(Type::kInstant, 8, 10, {}, false, text_a));
  r.push_back(Rec(Type::kInstant, 8, 10, {}, false, text_a));  // same everything
  r.push_back(Rec(Type::kInstant, 9, 10, {}, false, nullptr));
  r.push_back(Rec(Type::kEnd, 9, 10, f));  // the frame before the instants
  r.push_back(Rec(Type::kBegin, UINT64_MAX, UINT64_MAX, {.address = UINT64_MAX, .kind = Kind::kFunction}));
  r.push_back(Rec(Type::kBegin, 0, 0, {.address = 0, .kind = Kind::kFunction}, true));  // all back
  r.push_back(Rec(Type::kBegin, UINT64_MAX / 2 + 1, 1, {.address = UINT64_MAX / 2 + 1, .kind = Kind::kFunction}));
  r.push_back(Rec(Type::kEnd, 1, UINT64_MAX - 1, {.address = 1, .inline_index = 7, .kind = Kind::kInlined}, true));
  r.push_back(Rec(Type::kInstant, UINT64_MAX, 0, {}, true, text_b));
  // The frame of the record before the instant again: an instant's text is no frame.
  r.push_back(Rec(Type::kEnd, UINT64_MAX, 0, {.address = 1, .inline_index = 7, .kind = Kind::kInlined}));
  return r;
}

std::vector<SliceRecord> RoundTrip(const std::vector<SliceRecord>& records, size_t* bytes,
                                   std::vector<std::string>* texts) {
  std::vector<uint8_t> encoded(records.size() * RecordSpill::kMaxRecordBytes);
  *bytes = RecordSpill::Encode(records.data(), records.size(), encoded.data(), texts);
  CHECK(*bytes <= encoded.size());
  encoded.resize(*bytes);  // exactly the block: a read past it is one past the vector
  std::vector<SliceRecord> out(records.size());
  SliceRecord prev;
  const uint8_t* end = RecordSpill::Decode(encoded.data(), encoded.data() + encoded.size(),
                                           records.size(), &prev, out.data(), texts->data(),
                                           texts->size());
  CHECK(end == encoded.data() + *bytes);  // decoding reads exactly what encoding wrote
  return out;
}

std::vector<SliceRecord> RoundTrip(const std::vector<SliceRecord>& records, size_t* bytes) {
  std::vector<std::string> texts;
  std::vector<SliceRecord> out = RoundTrip(records, bytes, &texts);
  for (SliceRecord& r : out) {
    if (r.type == Type::kInstant) r.SetText(nullptr);  // (not kept past `texts`)
  }
  return out;
}

TEST_CASE("the compact encoding gives back every record exactly") {
  const std::string a = "[gap] overflow", b = "[trigger] x";
  const std::vector<SliceRecord> records = EdgeRecords(&a, &b);
  size_t bytes = 0;
  std::vector<std::string> texts;
  CheckSame(RoundTrip(records, &bytes, &texts), records);
  // One record at a time too (each from an all-zero record: a block's first).
  for (const SliceRecord& r : records) {
    std::vector<std::string> one;
    CheckSame(RoundTrip({r}, &bytes, &one), {r});
  }
}

TEST_CASE("texts travel by index into the block's own table, never as pointers") {
  std::string a = "[gap] overflow", b = "[trigger] a longer text than fits a short string";
  const std::vector<SliceRecord> records = EdgeRecords(&a, &b);
  std::vector<uint8_t> encoded(records.size() * RecordSpill::kMaxRecordBytes);
  std::vector<std::string> texts;
  const size_t bytes = RecordSpill::Encode(records.data(), records.size(), encoded.data(), &texts);
  // Copies, in record order: a, a, b; the null text has none.
  CHECK(texts == std::vector<std::string>{a, a, b});
  // No pointer in the bytes: the originals change, the decoded records still read the copies,
  // and they point into the table they were decoded with.
  a = "changed";
  b = "changed too";
  std::vector<SliceRecord> out(records.size());
  SliceRecord prev;
  REQUIRE(RecordSpill::Decode(encoded.data(), encoded.data() + bytes, records.size(), &prev,
                              out.data(), texts.data(), texts.size()) == encoded.data() + bytes);
  std::vector<const std::string*> pointers;
  for (const SliceRecord& r : out) {
    if (r.type == Type::kInstant && r.text() != nullptr) pointers.push_back(r.text());
  }
  CHECK(pointers == std::vector<const std::string*>{&texts[0], &texts[1], &texts[2]});
  CHECK(*out[20].text() == "[gap] overflow");
  // An index past the table is bad bytes: the same records against a shorter table fail.
  prev = SliceRecord{};
  CHECK(RecordSpill::Decode(encoded.data(), encoded.data() + bytes, records.size(), &prev,
                            out.data(), texts.data(), 2) == nullptr);
}

TEST_CASE("bytes cut short or changed decode to an error, never past the block") {
  const std::string a = "[gap] overflow", b = "[trigger] x";
  const std::vector<SliceRecord> records = EdgeRecords(&a, &b);
  std::vector<uint8_t> full(records.size() * RecordSpill::kMaxRecordBytes);
  std::vector<std::string> texts;
  const size_t bytes = RecordSpill::Encode(records.data(), records.size(), full.data(), &texts);
  full.resize(bytes);
  std::vector<SliceRecord> out(records.size());
  // Every prefix lacks some byte of some record: each is refused. A heap copy of exactly the
  // prefix: a read past it is past the allocation (the sanitizer build sees it).
  for (size_t len = 0; len < bytes; ++len) {
    CAPTURE(len);
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<ptrdiff_t>(len));
    SliceRecord prev;
    CHECK(RecordSpill::Decode(cut.data(), cut.data() + cut.size(), records.size(), &prev,
                              out.data(), texts.data(), texts.size()) == nullptr);
  }
  // Every byte changed in several ways: refused, or records within the bytes whose texts are
  // the table's.
  size_t refused = 0, tries = 0;
  for (size_t at = 0; at < bytes; ++at) {
    for (uint8_t flip : {0x01, 0x03, 0x40, 0x80, 0xff}) {
      std::vector<uint8_t> bad = full;
      bad[at] ^= flip;
      SliceRecord prev;
      const uint8_t* end = RecordSpill::Decode(bad.data(), bad.data() + bad.size(),
                                               records.size(), &prev, out.data(), texts.data(),
                                               texts.size());
      ++tries;
      if (end == nullptr) {
        ++refused;
        continue;
      }
      CHECK((end >= bad.data() && end <= bad.data() + bad.size()));
      for (const SliceRecord& r : out) {
        CHECK(static_cast<uint8_t>(r.type) <= static_cast<uint8_t>(Type::kInstant));
        if (r.type != Type::kInstant) continue;
        CHECK((r.text() == nullptr ||
               (r.text() >= texts.data() && r.text() < texts.data() + texts.size())));
      }
    }
  }
  CHECK(refused > tries / 4);  // most changes are caught outright
  // A type that does not exist, alone.
  const uint8_t type3[] = {0x03, 0, 0, 0};
  SliceRecord prev;
  CHECK(RecordSpill::Decode(type3, type3 + 4, 1, &prev, out.data(), nullptr, 0) == nullptr);
  // Unknown flags, and a varint longer than 10 bytes.
  const uint8_t flags[] = {0x80, 0x04, 0, 0, 0};
  CHECK(RecordSpill::Decode(flags, flags + 5, 1, &prev, out.data(), nullptr, 0) == nullptr);
  const uint8_t long_varint[] = {0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                 0x80, 0x01, 0, 0};
  CHECK(RecordSpill::Decode(long_varint, long_varint + sizeof(long_varint), 1, &prev,
                            out.data(), nullptr, 0) == nullptr);
}

TEST_CASE("a call-and-return run encodes in a few bytes a record") {
  // What a tracker holds back: nested calls and returns, small steps of time and instructions.
  std::vector<SliceRecord> records;
  uint64_t t = 1'000'000'000, insns = 0;
  for (int i = 0; i < 1000; ++i) {
    const FrameId outer{.address = 0x401000 + 0x40u * static_cast<unsigned>(i % 7)};
    const FrameId inner{.address = 0x402000 + 0x100u * static_cast<unsigned>(i % 5)};
    records.push_back(Rec(Type::kBegin, t += 20, insns += 30, outer));
    records.push_back(Rec(Type::kBegin, t += 5, insns += 7, inner));
    records.push_back(Rec(Type::kEnd, t += 9, insns += 12, inner));
    records.push_back(Rec(Type::kEnd, t, insns, outer));  // closed at the same event
  }
  size_t bytes = 0;
  CheckSame(RoundTrip(records, &bytes), records);
  // Per call and return (4 records, 160 bytes as SliceRecords): 4 tags, 3 pairs of one-byte
  // clock steps, 3 address steps of 2 or 3 bytes (the inner End has its Begin's frame): 16.
  CHECK(bytes < 4 * records.size() + 16);
  CHECK(bytes > records.size());
}

// Records of `blocks` blocks of `block` records: every block holds edges and runs that cross
// into the next (the same frame and clock across a boundary).
std::vector<SliceRecord> ManyRecords(size_t count, const std::string* text) {
  std::vector<SliceRecord> records;
  uint64_t t = 0;
  for (size_t i = 0; records.size() < count; ++i) {
    for (const SliceRecord& r : EdgeRecords(text, text)) {
      SliceRecord shifted = r;
      if (shifted.time_ns < UINT64_MAX - 1000) shifted.time_ns += t;
      records.push_back(shifted);
      records.push_back(shifted);  // a run of the same
    }
    t += 17;
  }
  records.resize(count);
  return records;
}

std::vector<SliceRecord> ReadBlock(RecordSpill& spill, int64_t handle, size_t run) {
  RecordSpill::Reader reader;
  std::vector<SliceRecord> out, scratch(run);
  REQUIRE(reader.Open(spill, handle));
  const SliceRecord* records = nullptr;
  while (size_t n = reader.Read(&records, scratch.data(), run)) {
    CHECK(n <= run);
    out.insert(out.end(), records, records + n);
  }
  return out;
}

// Stores records [first, first + count) through a buffer, as a tracker does.
int64_t StoreCopy(RecordSpill& spill, const std::vector<SliceRecord>& records, size_t first,
                  size_t count) {
  std::vector<SliceRecord> buffer(records.begin() + static_cast<ptrdiff_t>(first),
                                  records.begin() + static_cast<ptrdiff_t>(first + count));
  const int64_t handle = spill.Store(buffer, count);
  CHECK(buffer.size() == count);  // the caller's buffer keeps its size, kept or not
  return handle;
}

TEST_CASE("blocks come back exactly from memory within the budget and from the file past it") {
  const std::string text = "[trigger] mark";
  const size_t block = 37;  // not a multiple of the read runs below, nor of EdgeRecords
  const std::vector<SliceRecord> records = ManyRecords(block * 6, &text);
  const size_t raw2 = 2 * block * sizeof(SliceRecord);
  // Where the 6 blocks wait: the file; encoded in memory, then the file; encoded in memory; as
  // they are (raw); 2 raw and 4 in the file; 2 raw, then encoded, then the file.
  for (auto [raw, encoded] : {std::pair<size_t, size_t>{0, 0}, {0, 300}, {0, SIZE_MAX},
                              {SIZE_MAX, 0}, {raw2, 0}, {raw2, 300}}) {
    CAPTURE(raw);
    CAPTURE(encoded);
    RecordSpill spill(block, raw, encoded);
    std::vector<int64_t> handles;
    for (size_t i = 0; i < 6; ++i) handles.push_back(StoreCopy(spill, records, i * block, block));
    CHECK(spill.blocks_stored() == 6);
    CHECK(spill.peak_blocks() == 6);
    const uint64_t raw_blocks = raw == SIZE_MAX ? 6 : raw == raw2 ? 2 : 0;
    CHECK(spill.blocks_raw() == raw_blocks);
    if (encoded == 0) CHECK(spill.blocks_in_file() == 6 - raw_blocks);
    if (encoded == 300) CHECK((spill.blocks_in_file() > 0 && spill.blocks_in_file() < 6 - raw_blocks));
    if (encoded == SIZE_MAX || raw == SIZE_MAX) CHECK(spill.blocks_in_file() == 0);
    // Freed slots and raw blocks are reused: release two, store two others, and everything
    // still reads back.
    spill.Release(handles[1]);
    spill.Release(handles[4]);
    handles[1] = StoreCopy(spill, records, 4 * block, block);
    handles[4] = StoreCopy(spill, records, 1 * block, block);
    // All raw: both again. Two raw: handles[1]'s vector serves one, none is left for the other.
    CHECK(spill.blocks_raw() == (raw == SIZE_MAX ? 8 : raw == raw2 ? 3 : 0));
    const size_t source[6] = {0, 4, 2, 3, 1, 5};
    for (size_t i = 0; i < 6; ++i) {
      CAPTURE(i);
      const std::vector<SliceRecord> want(records.begin() + static_cast<ptrdiff_t>(source[i] * block),
                                          records.begin() + static_cast<ptrdiff_t>((source[i] + 1) * block));
      for (size_t run : {size_t{1}, size_t{5}, size_t{4096}}) CheckSame(ReadBlock(spill, handles[i], run), want);
    }
    for (int64_t h : handles) spill.Release(h);
    CHECK(spill.peak_blocks() == 6);
    CHECK(spill.error().empty());
  }
}

TEST_CASE("a block's texts come back from wherever it waits after the tracker's are gone") {
  SpillDir dir;
  const size_t block = 4;
  for (auto [raw, encoded] : {std::pair<size_t, size_t>{0, 0}, {0, SIZE_MAX}}) {
    RecordSpill spill(block, raw, encoded);
    auto text = std::make_unique<std::string>("[trigger] hit at a place with a long name");
    std::vector<SliceRecord> buffer{Rec(Type::kBegin, 1, 1, {.address = 0x10}),
                                    Rec(Type::kInstant, 2, 2, {}, false, text.get()),
                                    Rec(Type::kInstant, 3, 3, {}, false, nullptr),
                                    Rec(Type::kEnd, 4, 4, {.address = 0x10})};
    const int64_t handle = spill.Store(buffer, block);
    CHECK(spill.blocks_in_file() == (encoded == 0 ? 1 : 0));
    text.reset();  // the tracker's text is gone (what was a pointer would now dangle)
    const std::vector<SliceRecord> got = ReadBlock(spill, handle, 2);
    REQUIRE(got.size() == 4);
    REQUIRE(got[1].text() != nullptr);
    CHECK(*got[1].text() == "[trigger] hit at a place with a long name");
    CHECK(got[2].text() == nullptr);
    spill.Release(handle);
    CHECK(spill.error().empty());
  }
}

// Reads a block to its end; returns how many records came.
size_t Drain(RecordSpill& spill, int64_t handle) {
  RecordSpill::Reader reader;
  REQUIRE(reader.Open(spill, handle));  // its bytes are there; whether they decode is Read's
  std::vector<SliceRecord> scratch(4);
  const SliceRecord* run = nullptr;
  size_t got = 0;
  while (size_t n = reader.Read(&run, scratch.data(), 4)) got += n;
  return got;
}

TEST_CASE("a block whose bytes in the file changed is an error naming the directory") {
  // Blocks of 16 records of the same frame and clock: a tag byte each after the first (about
  // 21 bytes a block).
  const std::vector<SliceRecord> records(16, Rec(Type::kBegin, 5, 9, {.address = 0x401000}));
  const off_t slot = static_cast<off_t>(16 * RecordSpill::kMaxRecordBytes);
  SUBCASE("records running past the block's bytes") {
    // Zeros read as records of 4 bytes each: the 6th runs past the block.
    SpillDir dir;
    RecordSpill spill(16, 0, 0);
    const int64_t first = StoreCopy(spill, records, 0, 16);
    const int64_t second = StoreCopy(spill, records, 0, 16);
    CHECK(spill.blocks_in_file() == 2);
    CHECK(spill.bytes_stored() < 2 * 24);
    const int fd = SpillFd(dir.path);
    REQUIRE(fd >= 0);
    const std::vector<uint8_t> zeros(static_cast<size_t>(slot));
    REQUIRE(pwrite(fd, zeros.data(), zeros.size(), 0) == static_cast<ssize_t>(zeros.size()));
    // The second block (the next slot) is untouched and reads back; the first does not.
    CheckSame(ReadBlock(spill, second, 16), records);
    CHECK(spill.error().empty());
    CHECK(Drain(spill, first) < 16);
    CHECK(spill.error().find("cannot read held-back slice records back from the temporary file in " +
                             dir.path) != std::string::npos);
    CHECK(spill.error().find("corrupt") != std::string::npos);
    spill.Release(first);
    spill.Release(second);
  }
  SUBCASE("records ending before the block's bytes") {
    // 16 tags "begin, the previous frame and clock": 16 all-zero records, 5 bytes before the
    // end. Valid records, but not the block's: an error, not a wrong output.
    SpillDir dir;
    RecordSpill spill(16, 0, 0);
    const int64_t first = StoreCopy(spill, records, 0, 16);
    const std::vector<uint8_t> tags(16, 0x78);
    REQUIRE(pwrite(SpillFd(dir.path), tags.data(), tags.size(), 0) == 16);
    Drain(spill, first);
    CHECK(spill.error().find("corrupt") != std::string::npos);
    spill.Release(first);
  }
}

TEST_CASE("a block the file cannot give back is an error naming the directory") {
  SpillDir dir;
  const std::string text = "x";
  const std::vector<SliceRecord> records = ManyRecords(64, &text);
  RecordSpill spill(32, 0, 0);
  const int64_t first = StoreCopy(spill, records, 0, 32);
  const int64_t second = StoreCopy(spill, records, 32, 32);
  CHECK(spill.blocks_in_file() == 2);
  CheckSame(ReadBlock(spill, first, 8), {records.begin(), records.begin() + 32});
  CHECK(spill.error().empty());
  // The file loses its bytes (as a failing disk would).
  const int fd = SpillFd(dir.path);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 0) == 0);
  RecordSpill::Reader reader;
  CHECK_FALSE(reader.Open(spill, second));
  SliceRecord scratch[4];
  const SliceRecord* run = nullptr;
  CHECK(reader.Read(&run, scratch, 4) == 0);  // nothing of it comes back
  CHECK(spill.error().find("cannot read held-back slice records back") != std::string::npos);
  CHECK(spill.error().find(dir.path) != std::string::npos);
  spill.Release(first);
  spill.Release(second);
}

TEST_CASE("a tracker whose held-back records cannot be read back leaves them out and says so") {
  // main calls a and b 40 times and never returns: 160 records held back, in blocks of 8 in
  // the file (no memory budget). The file loses its bytes before the flush at the end.
  SpillDir dir;
  testing::FakeNamer namer({{"main", 0x1000}, {"a", 0x2000}, {"b", 0x3000}});
  RecordSpill spill(8, 0, 0);
  StackTrackerOptions options;
  options.spill = &spill;
  auto run = [&](bool truncate) {
    testing::TreeSink sink(namer);
    StackTracker tracker(ThreadKey{1, 1}, namer, sink, options);
    FlowEvent e;
    uint64_t t = 0;
    for (int i = 0; i < 40; ++i) {
      for (uint64_t callee : {0x2000u, 0x3000u}) {
        e = {};
        e.kind = FlowEvent::Kind::kCall;
        e.time_ns = t += 10;
        e.from = 0x1010;
        e.to = callee;
        e.call_size = 5;
        tracker.OnEvent(e);
        e = {};
        e.kind = FlowEvent::Kind::kReturn;
        e.time_ns = t += 10;
        e.from = callee + 0x50;
        e.to = 0x1015;
        tracker.OnEvent(e);
      }
    }
    if (truncate) REQUIRE(ftruncate(SpillFd(dir.path), 0) == 0);
    tracker.Finish(t + 1);
    return sink.Tree();
  };
  const std::string whole = run(false);
  CHECK(spill.error().empty());
  CHECK(spill.blocks_in_file() >= 19);  // 160 records, the last partial block stays resident
  const std::string cut = run(true);
  CHECK(spill.error().find("cannot read held-back slice records back") != std::string::npos);
  CHECK(cut.size() < whole.size());  // the records of the unread blocks are missing
}

}  // namespace
}  // namespace ptscope::decode
