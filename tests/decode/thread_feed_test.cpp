// ThreadFeed: what one thread's run of events becomes - the slices with the triggers in time order
// among them, and the counts (instructions, traced time, time in gaps) - exactly.
#include "join/thread_feed.h"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "fake_frames.h"

namespace ptscope::decode {
namespace {

using K = FlowEvent::Kind;

using testing::Ev;

TriggerMark Trigger(uint64_t t, std::string text) {
  TriggerMark mark;
  mark.time_ns = t;
  mark.text = std::move(text);
  return mark;
}

struct Feed {
  explicit Feed(std::vector<TriggerMark> triggers)
      : namer({{"main", 0x1000}, {"a", 0x2000}}),
        sink(namer),
        feed(ThreadKey{7, 8}, namer, FeedSinks{sink}, std::move(triggers)) {}
  testing::FakeNamer namer;
  testing::TreeSink sink;
  ThreadFeed feed;
};

TEST_CASE("a run's triggers come before the first event at or after them; gap time is counted") {
  Feed f({Trigger(25, "t1"), Trigger(25, "t2"), Trigger(62, "t3"), Trigger(90, "late")});
  std::vector<FlowEvent> run = {
      Ev(K::kEnable, 10, 0, 0x1000, 0),       Ev(K::kCall, 20, 0x1010, 0x2000, 5),
      Ev(K::kReturn, 30, 0x2050, 0x1015, 7),  Ev(K::kGap, 40, 0, 0, 2),
      Ev(K::kEnable, 50, 0, 0x1000, 0),       Ev(K::kCall, 45, 0x1010, 0x2000, 3),  // clamped to 50
      Ev(K::kReturn, 70, 0x2050, 0x1015, 4)};
  f.feed.DeliverRun(run);
  CHECK(run[5].time_ns == 50);
  f.feed.Finish(0x1020, 1, 80);
  CHECK(f.sink.violations.empty());
  CHECK(f.sink.Tree() ==
        "main* 10-40\n"
        "  a 20-30\n"
        "    ! [trigger] t1 @25\n"
        "    ! [trigger] t2 @25\n"
        "! [gap] decode error @40\n"
        "main* 40-80\n"
        "  a 50-70\n"
        "    ! [trigger] t3 @62\n"
        "! [trigger] late @90\n");
  CHECK(f.feed.instructions() == 5 + 7 + 2 + 3 + 4 + 1);
  CHECK(f.feed.traced_ns() == 80 - 10);
  CHECK(f.feed.gap_ns() == 50 - 40);
  CHECK(!f.feed.ends_in_gap());
}

// A trigger before the first event is the first thing the thread shows (its first frame starts
// there).
TEST_CASE("time before the first event and after a gap that ends the trace") {
  Feed f({Trigger(5, "before")});
  std::vector<FlowEvent> run = {Ev(K::kEnable, 10, 0, 0x1000, 0),
                                Ev(K::kCall, 20, 0x1010, 0x2000, 5),
                                Ev(K::kGap, 30, 0, 0, 1)};
  f.feed.DeliverRun(run);
  f.feed.Finish(0, 0, 0);
  CHECK(f.sink.Tree() ==
        "main* 5-30\n"
        "  ! [trigger] before @5\n"
        "  a 20-30\n"
        "! [gap] decode error @30\n");
  CHECK(f.feed.traced_ns() == 30 - 10);
  CHECK(f.feed.gap_ns() == 0);
  CHECK(f.feed.ends_in_gap());
}

// The summary's symbolized share: each event's instructions count when the code they ran in (the
// event's `from`, else the last `to`) is named. CodeFacts answers for whole stretches, and the
// feed keeps the last four it was told about: code that moves between four stretches asks about
// each once, five in turn ask every time. The count is exact either way.
struct Stretches : testing::FakeNamer {
  Stretches() : FakeNamer({{"main", 0x1000}}) {}
  bool InNamedCode(uint32_t, uint64_t address, uint64_t, uint64_t* start, uint64_t* end) override {
    ++questions;
    *start = address & ~uint64_t{0xfff};
    *end = *start + 0x1000;
    return ((address >> 12) & 1) != 0;  // 0x1000-0x1fff named, 0x2000-0x2fff not, ...
  }
  int questions = 0;
};

TEST_CASE("symbolized instructions: exact, with four stretches asked about once each") {
  for (const uint64_t stretches : {4u, 5u}) {
    Stretches namer;
    testing::TreeSink sink(namer);
    ThreadFeed feed(ThreadKey{7, 8}, namer, FeedSinks{sink}, {});
    std::vector<FlowEvent> run = {Ev(K::kEnable, 1, 0, 0x1000, 0)};
    uint64_t expected = 0, all = 0;
    for (uint64_t i = 0; i < 40; ++i) {
      const uint64_t here = 0x1000 + (i % stretches) * 0x1000 + 0x10;
      const uint64_t next = 0x1000 + ((i + 1) % stretches) * 0x1000;
      const uint64_t insns = 3 + i;
      run.push_back(Ev(K::kJump, 2 + i, here, next, insns));
      if (((here >> 12) & 1) != 0) expected += insns;
      all += insns;
    }
    // No `from`: where the last event went (0x1000 + (40 % stretches) * 0x1000).
    run.push_back(Ev(K::kDisable, 50, 0, 0, 7));
    const uint64_t last_to = 0x1000 + (40 % stretches) * 0x1000;
    if (((last_to >> 12) & 1) != 0) expected += 7;
    feed.DeliverRun(run);
    CAPTURE(stretches);
    CHECK(feed.instructions() == all + 7);
    CHECK(feed.symbolized() == expected);
    if (stretches == 4) {
      CHECK(namer.questions == 4);
    } else {
      CHECK(namer.questions == 41);  // five in turn through four places: the 40 jumps, the end
    }
  }
}

}  // namespace
}  // namespace ptscope::decode
