// EventBuffer (decode/src/flow/event_buffer.h): vector behaviour, and the spare slot that the flow
// decoder writes for every block and keeps only for a block that ended in a branch.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "flow/event_buffer.h"
#include "flow/unit_clock.h"

namespace ptscope::decode {
namespace {

FlowEvent Event(uint64_t from, FlowEvent::Kind kind = FlowEvent::Kind::kCall) {
  FlowEvent event;
  event.kind = kind;
  event.from = from;
  event.to = from + 0x10;
  event.insn_count = from % 7;
  return event;
}

TEST_CASE("a spare slot is kept by Commit(1) and dropped by Commit(0)") {
  EventBuffer buffer;
  for (uint64_t i = 1; i <= 1000; ++i) {
    *buffer.Spare() = Event(i);
    buffer.Commit(i % 3 == 0 ? 1 : 0);  // keep every third
  }
  REQUIRE(buffer.size() == 333);
  for (size_t k = 0; k < buffer.size(); ++k) {
    CHECK(buffer[k].from == 3 * (k + 1));
    CHECK(buffer[k].to == 3 * (k + 1) + 0x10);
    CHECK(buffer[k].insn_count == (3 * (k + 1)) % 7);
  }
  CHECK(buffer.capacity() >= 334);  // the slot after the last event stays writable
}

TEST_CASE("emplace_back gives a default event even where a dropped slot left one") {
  EventBuffer buffer;
  *buffer.Spare() = Event(0x1234, FlowEvent::Kind::kReturn);
  buffer.Commit(0);
  FlowEvent& fresh = buffer.emplace_back();
  CHECK(fresh.kind == FlowEvent::Kind::kCall);
  CHECK(fresh.from == 0);
  CHECK(fresh.to == 0);
  CHECK(fresh.time_ns == 0);
  CHECK(fresh.detail.empty());
  CHECK(buffer.size() == 1);
}

TEST_CASE("clear keeps the capacity; copies and moves keep the events") {
  EventBuffer buffer;
  for (uint64_t i = 0; i < 100; ++i) buffer.push_back(Event(i));
  const size_t capacity = buffer.capacity();
  EventBuffer copy = buffer;
  buffer.clear();
  CHECK(buffer.empty());
  CHECK(buffer.capacity() == capacity);
  REQUIRE(copy.size() == 100);
  CHECK(copy.back().from == 99);
  EventBuffer moved = std::move(copy);
  CHECK(copy.size() == 0);
  CHECK(copy.capacity() == 0);
  REQUIRE(moved.size() == 100);
  uint64_t sum = 0;
  for (const FlowEvent& event : moved) sum += event.from;
  CHECK(sum == 99 * 100 / 2);
}

}  // namespace
}  // namespace ptscope::decode

namespace ptscope::decode {
namespace {

// SliceRecord keeps type and inferred in FrameId's tail padding ([[no_unique_address]]): copying
// a frame in, or a whole record, must leave them as they are.
TEST_CASE("a SliceRecord's type and inferred survive assigning its frame") {
  SliceRecord record;
  record.type = SliceRecord::Type::kInstant;
  record.inferred = true;
  FrameId frame{.address = 0x401000, .inline_index = 7, .kind = FrameId::Kind::kInlined};
  record.frame = frame;
  CHECK(record.type == SliceRecord::Type::kInstant);
  CHECK(record.inferred);
  CHECK(record.frame == frame);
  SliceRecord copy;
  copy = record;
  CHECK(copy.type == SliceRecord::Type::kInstant);
  CHECK(copy.inferred);
  CHECK(copy.frame == frame);
  copy.frame = FrameId{};
  CHECK(copy.type == SliceRecord::Type::kInstant);
  CHECK(copy.inferred);
  CHECK(copy.frame.address == 0);
}

}  // namespace
}  // namespace ptscope::decode

namespace ptscope::decode {
namespace {

// UnitClock divides every waiting event's instruction offset by one interval's length through
// Divider (a reciprocal and one correction); its answers must be MulDiv's, bit for bit, or event
// times would move. Exhaustive near the edges where a reciprocal is off by one (divisors of the
// form 2^k and 2^k +- 1, quotients at and around exact multiples), and a pseudo-random sweep.
TEST_CASE("Divider::MulDiv gives MulDiv's answer for every input") {
  const auto expect_same = [](uint64_t a, uint64_t b, uint64_t c) {
    const uint64_t want = MulDiv(a, b, c), got = Divider(c).MulDiv(a, b);
    if (want != got) {
      CAPTURE(a);
      CAPTURE(b);
      CAPTURE(c);
      CHECK(got == want);
    }
    return want == got;
  };
  uint64_t checked = 0, mismatches = 0;
  std::vector<uint64_t> divisors = {1, 2, 3, 5, 7, 10, 1000, 999'999'937, UINT64_MAX,
                                    UINT64_MAX - 1, uint64_t{1} << 63, (uint64_t{1} << 63) + 1};
  for (unsigned k = 1; k < 64; ++k) {
    divisors.push_back((uint64_t{1} << k) - 1);
    divisors.push_back(uint64_t{1} << k);
    divisors.push_back((uint64_t{1} << k) + 1);
  }
  for (const uint64_t c : divisors) {
    // Products at, just below and just above multiples of c, small and near 2^64.
    for (const uint64_t q : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{12345},
                             UINT64_MAX / c, UINT64_MAX / c - 1}) {
      for (const uint64_t delta : {uint64_t{0}, uint64_t{1}, c - 1, c / 2}) {
        unsigned __int128 x = static_cast<unsigned __int128>(q) * c + delta;
        if (x > UINT64_MAX) continue;
        mismatches += expect_same(static_cast<uint64_t>(x), 1, c) ? 0 : 1;
        mismatches += expect_same(1, static_cast<uint64_t>(x), c) ? 0 : 1;
        ++checked;
      }
    }
    // Products that overflow 64 bits (MulDiv's 128-bit division).
    mismatches += expect_same(UINT64_MAX, 3, c) ? 0 : 1;
    mismatches += expect_same(uint64_t{1} << 40, uint64_t{1} << 40, c) ? 0 : 1;
  }
  uint64_t state = 0x9E3779B97F4A7C15ull;  // xorshift64: the same values every run
  const auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int i = 0; i < 200000; ++i) {
    // Time steps and instruction counts of every size, as UnitClock sees them.
    const uint64_t a = next() >> (next() % 64), b = next() >> (next() % 64);
    const uint64_t c = std::max<uint64_t>(1, next() >> (next() % 64));
    mismatches += expect_same(a, b, c) ? 0 : 1;
    ++checked;
  }
  CHECK(checked > 200000);
  CHECK(mismatches == 0);
}

}  // namespace
}  // namespace ptscope::decode
