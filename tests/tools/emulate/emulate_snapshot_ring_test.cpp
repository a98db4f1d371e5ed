// SnapshotRing: what pt-emulate keeps per thread in snapshot mode. It must always start at a PSB
// and drop only whole PSB segments.
#include <doctest/doctest.h>

#include <vector>

#include "snapshot_ring.h"

namespace ptscope::record {
namespace {

std::vector<uint8_t> Bytes(size_t n, uint8_t value) { return std::vector<uint8_t>(n, value); }

void Add(SnapshotRing& ring, size_t n, uint8_t value, bool psb) {
  if (psb) ring.MarkPsb();
  const auto bytes = Bytes(n, value);
  ring.Append(bytes.data(), bytes.size());
}

TEST_CASE("bytes before the first PSB are not kept") {
  SnapshotRing ring(100);
  Add(ring, 7, 1, false);
  CHECK(ring.contents().empty());
  Add(ring, 5, 2, true);
  CHECK(ring.start_offset() == 7);
  CHECK(ring.end_offset() == 12);
  CHECK(std::vector<uint8_t>(ring.contents().begin(), ring.contents().end()) == Bytes(5, 2));
}

TEST_CASE("over capacity, whole segments are dropped from the front") {
  SnapshotRing ring(100);
  Add(ring, 40, 1, true);   // segment A: [0, 40)
  Add(ring, 40, 2, true);   // segment B: [40, 80)
  Add(ring, 40, 3, true);   // segment C: [80, 120) -> 120 > 100: A goes
  CHECK(ring.start_offset() == 40);
  CHECK(ring.end_offset() == 120);
  std::vector<uint8_t> want = Bytes(40, 2);
  const auto c = Bytes(40, 3);
  want.insert(want.end(), c.begin(), c.end());
  CHECK(std::vector<uint8_t>(ring.contents().begin(), ring.contents().end()) == want);
}

TEST_CASE("the newest segment is kept even when it alone exceeds the capacity") {
  SnapshotRing ring(10);
  Add(ring, 4, 1, true);
  Add(ring, 30, 2, true);
  CHECK(ring.start_offset() == 4);
  CHECK(ring.contents().size() == 30);
  Add(ring, 1, 3, false);  // still inside the newest segment
  CHECK(ring.start_offset() == 4);
  CHECK(ring.contents().size() == 31);
}

TEST_CASE("a long run keeps a bounded, PSB-aligned tail (compaction keeps offsets right)") {
  SnapshotRing ring(4096);
  uint64_t written = 0;
  for (int i = 0; i < 5000; ++i) {
    Add(ring, 100, static_cast<uint8_t>(i), true);
    written += 100;
  }
  CHECK(ring.end_offset() == written);
  CHECK(ring.contents().size() <= 4096);
  CHECK(ring.contents().size() > 4096 - 100);
  CHECK(ring.start_offset() % 100 == 0);
  CHECK(ring.contents().front() == static_cast<uint8_t>(ring.start_offset() / 100));
  CHECK(ring.contents().back() == static_cast<uint8_t>(4999));
}

}  // namespace
}  // namespace ptscope::record
