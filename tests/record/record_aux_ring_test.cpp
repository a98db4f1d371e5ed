// The AUX and data ring logic against a simulated kernel: a real perf_event_mmap_page struct and
// buffers that the "kernel" below fills with genuine PT packet bytes the way perf's overwrite
// (snapshot) and non-overwrite (full) modes do.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>

#include "perf_ring.h"
#include "pt_aux_ring.h"
#include "pt_stream.h"
#include "ptscope/format.h"

namespace ptscope::record {
namespace {

using testing::FirstPsb;
using testing::MakePtStream;

struct SimulatedAux {
  explicit SimulatedAux(uint64_t size, bool overwrite)
      : page(std::make_unique<perf_event_mmap_page>()), aux(size, 0), overwrite(overwrite) {
    std::memset(page.get(), 0, sizeof(perf_event_mmap_page));
    page->aux_size = size;
  }
  // The kernel writing PT bytes: in overwrite mode forever around the ring with aux_head as the
  // offset inside it; otherwise only up to aux_tail + size (the rest is dropped: TRUNCATED).
  uint64_t Write(const std::vector<uint8_t>& bytes) {
    uint64_t dropped = 0;
    for (uint8_t b : bytes) {
      if (!overwrite && written - page->aux_tail == aux.size()) {
        ++dropped;
        continue;
      }
      aux[written % aux.size()] = b;
      ++written;
    }
    page->aux_head = overwrite && !running_count ? written % aux.size() : written;
    return dropped;
  }
  AuxRingView view() { return {page.get(), aux.data(), aux.size()}; }

  std::unique_ptr<perf_event_mmap_page> page;
  std::vector<uint8_t> aux;
  bool overwrite;
  bool running_count = false;
  uint64_t written = 0;
};

std::vector<uint8_t> Slice(const std::vector<uint8_t>& v, size_t from, size_t to) {
  return std::vector<uint8_t>(v.begin() + static_cast<long>(from), v.begin() + static_cast<long>(to));
}

}  // namespace

TEST_CASE("full mode: pieces follow aux_tail across the wrap, byte for byte") {
  SimulatedAux sim(4096, /*overwrite=*/false);
  std::vector<uint8_t> stream = MakePtStream(9000);
  AuxStreamReader reader;
  CHECK(!reader.Read(sim.view()));
  sim.Write(Slice(stream, 0, 3000));
  auto first = reader.Read(sim.view());
  REQUIRE(first);
  CHECK(first->stream_offset == 0);
  CHECK(first->flags == 0);
  CHECK(first->data == Slice(stream, 0, 3000));
  CHECK(sim.page->aux_tail == 3000);
  sim.Write(Slice(stream, 3000, 7000));  // wraps at 4096
  auto second = reader.Read(sim.view());
  REQUIRE(second);
  CHECK(second->stream_offset == 3000);
  CHECK(second->data == Slice(stream, 3000, 7000));
  CHECK(sim.page->aux_tail == 7000);
  CHECK(!reader.Read(sim.view()));
}

TEST_CASE("full mode: a reader that falls behind gets TRUNCATED on the next piece") {
  SimulatedAux sim(4096, false);
  std::vector<uint8_t> stream = MakePtStream(6000);
  AuxStreamReader reader;
  uint64_t dropped = sim.Write(stream);
  CHECK(dropped == 6000 - 4096);
  reader.NoteTruncated();  // what the PERF_RECORD_AUX flag tells the session
  auto piece = reader.Read(sim.view());
  REQUIRE(piece);
  CHECK(piece->flags == format::kPtTruncated);
  CHECK(piece->data == Slice(stream, 0, 4096));
  auto next = reader.Read(sim.view());
  CHECK(!next);
}

TEST_CASE("snapshot mode before the first wrap: new bytes only, from offset 0") {
  SimulatedAux sim(4096, /*overwrite=*/true);
  std::vector<uint8_t> stream = MakePtStream(1500);
  AuxSnapshotReader reader;
  sim.Write(Slice(stream, 0, 1000));
  auto first = reader.Take(sim.view());
  REQUIRE(first);
  CHECK(first->flags == format::kPtSnapshot);
  CHECK(first->stream_offset == 0);
  CHECK(first->data == Slice(stream, 0, 1000));
  CHECK(!reader.Take(sim.view()));  // nothing new
  sim.Write(Slice(stream, 1000, 1500));
  auto second = reader.Take(sim.view());
  REQUIRE(second);
  CHECK(second->stream_offset == 1000);
  CHECK(second->data == Slice(stream, 1000, 1500));
  CHECK(!reader.wrapped());
}

TEST_CASE("snapshot mode after wrapping: the newest ring-full, oldest first, mid-packet start") {
  SimulatedAux sim(4096, true);
  std::vector<uint8_t> stream = MakePtStream(10000);
  sim.Write(stream);
  AuxSnapshotReader reader;
  auto piece = reader.Take(sim.view());
  REQUIRE(piece);
  CHECK(reader.wrapped());
  CHECK(piece->flags == (format::kPtSnapshot | format::kPtOverwritten));
  CHECK(piece->data == Slice(stream, 10000 - 4096, 10000));
  // It starts inside a packet; the first PSB is where the stream had one.
  std::vector<uint8_t> tail = Slice(stream, 10000 - 4096, 10000);
  CHECK(FirstPsb(piece->data) == FirstPsb(tail));
  CHECK(FirstPsb(piece->data) > 0);
}

TEST_CASE("snapshot mode: a ring filled exactly once is whole and in order") {
  SimulatedAux sim(4096, true);
  std::vector<uint8_t> stream = MakePtStream(4096);
  sim.Write(stream);
  CHECK(sim.page->aux_head == 0);
  AuxSnapshotReader reader;
  auto piece = reader.Take(sim.view());
  REQUIRE(piece);
  CHECK(piece->data == stream);
  CHECK(piece->flags == (format::kPtSnapshot | format::kPtOverwritten));
}

TEST_CASE("snapshot mode: a head that came round past the buffer's end: only the new bytes") {
  SimulatedAux sim(4096, true);
  // 3000 bytes of PT, then PAD (0x00) to the ring's end: the end-of-buffer probe sees zeros.
  std::vector<uint8_t> stream = MakePtStream(3000);
  stream.resize(4096, 0x00);
  std::vector<uint8_t> more = MakePtStream(200);
  AuxSnapshotReader reader;
  sim.Write(Slice(stream, 0, 3000));
  REQUIRE(reader.Take(sim.view()));
  sim.Write(Slice(stream, 3000, 4096));
  sim.Write(more);
  auto piece = reader.Take(sim.view());
  REQUIRE(piece);
  // The bytes before the previous head are unchanged: the ring did not go round past them, so
  // what lies between the two heads is all that is new (the rest was in the first snapshot).
  CHECK(!reader.wrapped());
  CHECK(piece->flags == format::kPtSnapshot);
  std::vector<uint8_t> expected = Slice(stream, 3000, 4096);
  expected.insert(expected.end(), more.begin(), more.end());
  CHECK(piece->data == expected);
  CHECK(piece->stream_offset == 3000);
}

TEST_CASE("snapshot mode: a running-count aux_head gives the exact stream offset") {
  SimulatedAux sim(4096, true);
  sim.running_count = true;
  std::vector<uint8_t> stream = MakePtStream(9000);
  sim.Write(stream);
  AuxSnapshotReader reader;
  auto piece = reader.Take(sim.view());
  REQUIRE(piece);
  CHECK(piece->stream_offset == 9000 - 4096);
  CHECK(piece->data == Slice(stream, 9000 - 4096, 9000));
}

TEST_CASE("data ring: records straddling the end come out whole and data_tail follows") {
  auto page = std::make_unique<perf_event_mmap_page>();
  std::memset(page.get(), 0, sizeof(perf_event_mmap_page));
  std::vector<uint8_t> ring(256, 0xee);
  // Five 48-byte records (header type 3 = COMM), numbered in their payload.
  std::vector<uint8_t> records;
  for (uint8_t n = 0; n < 5; ++n) {
    std::vector<uint8_t> rec(48, n);
    rec[0] = 3; rec[1] = 0; rec[2] = 0; rec[3] = 0;  // type
    rec[4] = 0; rec[5] = 0; rec[6] = 48; rec[7] = 0; // misc, size
    records.insert(records.end(), rec.begin(), rec.end());
  }
  DataRingView view{page.get(), ring.data(), ring.size()};
  // The kernel wrote 4 records starting at position 200 (so the 2nd straddles the end).
  page->data_tail = 200;
  for (size_t i = 0; i < 4 * 48; ++i) ring[(200 + i) % 256] = records[i];
  page->data_head = 200 + 4 * 48;
  std::vector<uint8_t> out;
  DrainStats stats = DrainDataRing(view, &out);
  CHECK(stats.bytes == 192);
  CHECK(!stats.overrun);
  CHECK(out == Slice(records, 0, 192));
  CHECK(page->data_tail == 392);
  out.clear();
  CHECK(DrainDataRing(view, &out).bytes == 0);
  CHECK(out.empty());
  page->data_head = 392 + 300;  // impossible: more than a ring ahead
  CHECK(DrainDataRing(view, &out).overrun);
  CHECK(out.empty());
}

}  // namespace ptscope::record
