// Per-unit stack tracking (stack/unit_speculation.cpp): a thread's events split into units at
// random points, each unit speculated on by a tracker of its own, reconciled by the join's
// tracker, must give exactly what one tracker over all the events gives: trees, instants, counts.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "fake_frames.h"
#include "stack/stack_tracker.h"

namespace ptscope::decode {
namespace {

using testing::FakeNamer;
using testing::TreeSink;
using K = FlowEvent::Kind;

std::vector<testing::FakeFunction> Functions() {
  return {{"main", 0x1000}, {"a", 0x2000}, {"b", 0x3000}, {"c", 0x4000}, {"d", 0x5000},
          {"rec", 0x6000}, {"handler", 0x7000}, {"__restore_rt", 0x8000}};
}

struct Rng {
  uint64_t state;
  uint64_t operator()(uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  }
};

FlowEvent Ev(K kind, uint64_t t, uint64_t from, uint64_t to) {
  FlowEvent e;
  e.kind = kind;
  e.time_ns = t;
  e.from = from;
  e.to = to;
  e.call_size = 5;
  return e;
}

// A program-like stream: calls and matching returns most of the time (so units begin and end
// deep inside call trees), with every other kind of event mixed in: wrong returns, tail calls,
// longjmps, syscalls, untraced stretches, signals, inlined depth changes, rare gaps.
std::vector<FlowEvent> ProgramEvents(uint64_t seed, int count) {
  Rng next{seed};
  std::vector<FlowEvent> events;
  std::vector<uint64_t> returns;  // the simulated stack's return addresses
  uint64_t t = 0, pc = 0x1010;
  auto fn = [&] { return 0x1000 + 0x1000 * next(6); };
  events.push_back(Ev(K::kEnable, t, 0, pc));
  for (int i = 0; i < count; ++i) {
    t += next(4);  // equal times too
    const uint64_t r = next(100);
    FlowEvent e;
    if (r < 40 && returns.size() < 40) {
      const uint64_t callee = fn();
      e = Ev(K::kCall, t, pc, callee);
      e.insn_count = next(20);
      returns.push_back(pc + 5);
      pc = callee + 0x10 + next(0x40);
    } else if (r < 78 && !returns.empty()) {
      e = Ev(K::kReturn, t, pc, returns.back());
      returns.pop_back();
      pc = e.to;
    } else if (r < 80) {
      e = Ev(K::kReturn, t, pc, fn() + 0x20);  // above the stack, or a wrong return
      pc = e.to;
      if (!returns.empty()) returns.pop_back();
    } else if (r < 84) {
      const uint64_t to = next(2) == 0 ? fn() : fn() + 0x30;  // tail call or landing
      e = Ev(K::kJump, t, pc, to);
      pc = to;
    } else if (r < 88) {
      e = Ev(next(2) == 0 ? K::kSyscall : K::kDisable, t, pc, next(3) == 0 ? 0 : pc + 2);
      events.push_back(e);
      t += next(3);
      // Resumes where it left, at a return address of the stack, or in a handler.
      uint64_t to = pc + 2;
      const uint64_t w = next(6);
      if (w == 0 && !returns.empty()) to = returns[next(returns.size())];
      if (w == 1) to = 0x7000;
      if (w == 2) to = pc;
      e = Ev(K::kEnable, t, 0, to);
      pc = to + 0x10;
    } else if (r < 91) {
      e = Ev(K::kAsync, t, pc, 0x7000);
      returns.push_back(pc);
      pc = 0x7010;
    } else if (r < 97) {
      e = Ev(K::kInlineChange, t, 0x1010, 0);  // where the namer has an inlined frame
      e.inline_depth = static_cast<uint32_t>(next(2));
    } else if (r < 98) {
      e = Ev(K::kGap, t, 0, 0);
      e.gap_cause = GapCause::kOverflow;
      returns.clear();
    } else {
      e = Ev(K::kCall, t, 0x1010, 0x2000);  // a call site with an inlined frame
      returns.push_back(0x1015);
      pc = 0x2010;
    }
    e.insn_count = next(30);
    events.push_back(e);
  }
  return events;
}

// The tree, and every record as the sink got it (instructions too), run by run.
class RecordingSink : public TreeSink {
 public:
  using TreeSink::TreeSink;
  void WriteRecords(const ThreadKey& thread, const SliceRecord* records, size_t count) override {
    log += "run " + std::to_string(count) + "\n";
    for (size_t i = 0; i < count; ++i) {
      const SliceRecord& r = records[i];
      log += std::to_string(static_cast<int>(r.type)) + (r.inferred ? "* " : " ") +
             std::to_string(r.time_ns) + " " + std::to_string(r.instructions) + " ";
      if (r.type == SliceRecord::Type::kInstant) {  // its frame's address holds its text
        log += "text" + (r.text() != nullptr ? " " + *r.text() : std::string()) + "\n";
      } else {
        log += std::to_string(r.frame.address) + "/" + std::to_string(r.frame.inline_index) +
               "/" + std::to_string(static_cast<int>(r.frame.kind)) + "\n";
      }
    }
    TreeSink::WriteRecords(thread, records, count);
  }
  std::string log;
};

struct Result {
  std::string tree, log;
  DecodeStats stats;
  size_t adopted = 0, replayed = 0, units = 0;
  std::pair<uint64_t, uint64_t> events;  // copied from the worker, run by the join's tracker
};

void AddInlinedSites(FakeNamer& namer) { namer.AddInlined(0x1010, {{"inl", "i.h", 1}}); }

// Delivered as ThreadFeed delivers: times clamped to be non-decreasing; a trigger now and then.
Result Serial(const std::vector<FlowEvent>& events, StackTrackerOptions options, uint64_t seed) {
  FakeNamer namer(Functions());
  AddInlinedSites(namer);
  RecordingSink sink(namer);
  StackTracker tracker(ThreadKey{7, 8}, namer, sink, options);
  Rng next{seed};
  uint64_t last = 0;
  for (FlowEvent e : events) {
    e.time_ns = std::max(e.time_ns, last);
    if (next(50) == 0) tracker.OnEvent(Ev(K::kTrigger, last, 0, 0));
    last = e.time_ns;
    tracker.OnEvent(e);
  }
  tracker.Finish(last + 1);
  CHECK(sink.violations.empty());
  return {sink.Tree(), sink.log, tracker.stats(), 0, 0, 0, {}};
}

// The same, split into units at random points; each unit speculated on first (as a worker
// would, seeing the unit's own times and its first event without the instructions the join
// carries into it), then reconciled. `broken_first_touch` spoils one touch's guess.
Result Reconciled(const std::vector<FlowEvent>& events, StackTrackerOptions options, uint64_t seed,
                  uint64_t split_seed, size_t mean_unit, bool spoil = false) {
  FakeNamer namer(Functions());
  AddInlinedSites(namer);
  RecordingSink sink(namer);
  TreeSink unused(namer);
  StackTracker tracker(ThreadKey{7, 8}, namer, sink, options);
  StackTracker worker(ThreadKey{7, 8}, namer, unused, options);
  Rng next{seed}, split{split_seed};
  Result result;
  uint64_t last = 0;
  StackTracker::Speculation spec;
  for (size_t first = 0; first < events.size();) {
    const size_t size = std::min(events.size() - first, 1 + split(2 * mean_unit));
    std::vector<FlowEvent> unit(events.begin() + first, events.begin() + first + size);
    const uint64_t carried = std::min<uint64_t>(unit[0].insn_count, split(3));
    unit[0].insn_count -= carried;
    worker.Speculate(unit, spec);
    unit[0].insn_count += carried;
    if (spoil && !spec.touches.empty() && spec.touches[0].after_count > 0) {
      spec.frames[spec.touches[0].after_first].return_ip ^= 1;
    }
    ++result.units;
    const bool adopt = spec.valid && unit[0].time_ns >= last;  // ThreadFeed's condition
    if (adopt) tracker.BeginAdopt(spec, unit[0].insn_count);
    for (size_t j = 0; j < unit.size(); ++j) {
      FlowEvent& e = unit[j];
      e.time_ns = std::max(e.time_ns, last);
      if (next(50) == 0) tracker.OnEvent(Ev(K::kTrigger, last, 0, 0));
      last = e.time_ns;
      if (adopt) {
        tracker.AdoptEvent(e, j);
      } else {
        tracker.OnEvent(e);
      }
    }
    if (adopt) ++(tracker.EndAdopt() ? result.adopted : result.replayed);
    first += size;
  }
  tracker.Finish(last + 1);
  CHECK(sink.violations.empty());
  result.tree = sink.Tree();
  result.log = sink.log;
  result.events = tracker.adopted_events();
  result.stats = tracker.stats();
  return result;
}

TEST_CASE("reconciled per-unit tracking equals one tracker over the whole thread") {
  size_t adopted = 0, replayed = 0;
  uint64_t copied = 0, run = 0;
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    const std::vector<FlowEvent> events = ProgramEvents(seed, 6000);
    for (uint32_t max_depth : {6u, 500u}) {
      for (size_t bound : {size_t{7}, size_t{1} << 20}) {
        StackTrackerOptions options;
        options.max_depth = max_depth;
        options.max_buffered_events = bound;
        for (bool inlined : {true, false}) {
          options.inlined_frames = inlined;
          const Result serial = Serial(events, options, seed);
          for (size_t mean_unit : {size_t{3}, size_t{40}, size_t{700}}) {
            CAPTURE(seed);
            CAPTURE(max_depth);
            CAPTURE(bound);
            CAPTURE(inlined);
            CAPTURE(mean_unit);
            const Result r = Reconciled(events, options, seed, seed * 31 + mean_unit, mean_unit);
            CHECK(r.tree == serial.tree);
            CHECK(r.log == serial.log);
            CHECK(r.stats.counts == serial.stats.counts);
            adopted += r.adopted;
            replayed += r.replayed;
            copied += r.events.first;
            run += r.events.second;
          }
        }
      }
    }
  }
  // Both ways were taken, and most units were adopted whole.
  CHECK(adopted > 0);
  CHECK(replayed > 0);
  CHECK(adopted > 2 * replayed);
  // A large share of the events was copied from the workers (the random streams touch the
  // incoming stack far more often than programs: units of 1 to 6 events, wrong returns).
  CHECK(2 * copied > run);
}

TEST_CASE("with a spill file, reconciled records come back in the same order") {
  const std::vector<FlowEvent> events = ProgramEvents(9, 8000);
  StackTrackerOptions options;
  options.max_depth = 8;
  // The serial run's blocks all go to the file; the reconciled run keeps two as they are.
  RecordSpill serial_spill(16, 0, 0), spill(16, 2 * 16 * sizeof(SliceRecord), 0);
  options.spill = &serial_spill;
  const Result serial = Serial(events, options, 9);
  options.spill = &spill;
  const Result r = Reconciled(events, options, 9, 5, 100);
  CHECK(spill.blocks_stored() > 0);
  CHECK(spill.error().empty());
  CHECK(r.tree == serial.tree);
  CHECK(r.log == serial.log);
  CHECK(r.stats.counts == serial.stats.counts);
}

TEST_CASE("a wrong guess about the incoming stack is found and the unit replayed") {
  // Unit 1 opens an inlined slice in main; unit 2 calls from inside it. The worker, not knowing
  // that main has an inlined slice open, wraps the callee in the call site's inlined frame; the
  // join's tracker does not (the slice is already open): the guessed frame differs.
  FakeNamer namer(Functions());
  AddInlinedSites(namer);
  TreeSink sink(namer), serial_sink(namer), unused(namer);
  StackTracker tracker(ThreadKey{7, 8}, namer, sink);
  StackTracker serial(ThreadKey{7, 8}, namer, serial_sink);
  StackTracker worker(ThreadKey{7, 8}, namer, unused);
  FlowEvent inline_change = Ev(K::kInlineChange, 5, 0x1010, 0);
  inline_change.inline_depth = 1;
  const std::vector<FlowEvent> unit1 = {Ev(K::kEnable, 0, 0, 0x1000), inline_change};
  const std::vector<FlowEvent> unit2 = {Ev(K::kCall, 10, 0x1010, 0x2000),
                                        Ev(K::kCall, 20, 0x2020, 0x3000),
                                        Ev(K::kReturn, 30, 0x3050, 0x2025),
                                        Ev(K::kReturn, 40, 0x2050, 0x1015)};
  StackTracker::Speculation spec;
  for (const auto* unit : {&unit1, &unit2}) {
    for (const FlowEvent& e : *unit) serial.OnEvent(e);
    worker.Speculate(*unit, spec);
    REQUIRE(spec.valid);
    tracker.BeginAdopt(spec, (*unit)[0].insn_count);
    for (size_t j = 0; j < unit->size(); ++j) tracker.AdoptEvent((*unit)[j], j);
    CHECK(tracker.EndAdopt() == (unit == &unit1));
  }
  serial.Finish(50);
  tracker.Finish(50);
  CHECK(sink.Tree() ==
        "main* 0-50\n"
        "  inl (inlined) 5-40\n"
        "    a 10-40\n"
        "      b 20-30\n");
  CHECK(sink.Tree() == serial_sink.Tree());
  CHECK(tracker.stats().counts == serial.stats().counts);
}

TEST_CASE("a spoiled guess is caught by the check, never adopted") {
  const std::vector<FlowEvent> events = ProgramEvents(5, 4000);
  StackTrackerOptions options;
  const Result serial = Serial(events, options, 5);
  const Result r = Reconciled(events, options, 5, 11, 50, /*spoil=*/true);
  CHECK(r.replayed > 0);
  CHECK(r.tree == serial.tree);
  CHECK(r.log == serial.log);
  CHECK(r.stats.counts == serial.stats.counts);
}

}  // namespace
}  // namespace ptscope::decode
