// EventBuffer (decode/src/flow/event_buffer.h): vector behaviour, and the spare slot that the flow
// decoder writes for every block and keeps only for a block that ended in a branch.
#include <doctest/doctest.h>

#include "flow/event_buffer.h"

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
