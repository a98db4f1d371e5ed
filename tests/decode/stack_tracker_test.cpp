// StackTracker: exact slice trees for every rule in DESIGN.md "Stack reconstruction".
// Trees print as "name[*] start-end" (* = inferred), children indented, instants "! text @t".
#include "stack/stack_tracker.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "fake_frames.h"

namespace ptscope::decode {
namespace {

using testing::FakeNamer;
using testing::TreeSink;
using K = FlowEvent::Kind;

// Every function spans [start, start + 0x100).
std::vector<testing::FakeFunction> Functions() {
  return {{"main", 0x1000}, {"a", 0x2000}, {"b", 0x3000}, {"c", 0x4000}, {"d", 0x5000},
          {"rec", 0x6000}, {"handler", 0x7000}, {"__restore_rt", 0x8000},
          {"__cxa_throw", 0x9000}};
}

FlowEvent Ev(K kind, uint64_t t, uint64_t from = 0, uint64_t to = 0) {
  FlowEvent e;
  e.kind = kind;
  e.time_ns = t;
  e.from = from;
  e.to = to;
  return e;
}
// A 5-byte call: the return address is from + 5.
FlowEvent Call(uint64_t t, uint64_t from, uint64_t to) {
  FlowEvent e = Ev(K::kCall, t, from, to);
  e.call_size = 5;
  return e;
}
FlowEvent Ret(uint64_t t, uint64_t from, uint64_t to) { return Ev(K::kReturn, t, from, to); }
FlowEvent Jmp(uint64_t t, uint64_t from, uint64_t to) { return Ev(K::kJump, t, from, to); }
FlowEvent Enable(uint64_t t, uint64_t to) { return Ev(K::kEnable, t, 0, to); }
FlowEvent End(uint64_t t) { return Ev(K::kEnd, t); }

struct Harness {
  explicit Harness(StackTrackerOptions options = {})
      : namer(Functions()), sink(namer), tracker(ThreadKey{7, 8}, namer, sink, options) {}
  std::string Run(const std::vector<FlowEvent>& events) {
    for (const FlowEvent& e : events) tracker.OnEvent(e);
    CHECK(sink.violations.empty());
    return sink.Tree();
  }
  FakeNamer namer;
  TreeSink sink;
  StackTracker tracker;
};

TEST_CASE("nested calls and returns under an inferred first frame") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Call(20, 0x2010, 0x3000),
               Ret(30, 0x3050, 0x2015), Ret(40, 0x2050, 0x1015), End(50)}) ==
        "main* 0-50\n"
        "  a 10-40\n"
        "    b 20-30\n");
  CHECK(h.tracker.stats()[Stat::kCalls] == 2);
  CHECK(h.tracker.stats()[Stat::kReturns] == 2);
  CHECK(h.tracker.stats()[Stat::kInferredFrames] == 1);
}

TEST_CASE("returns above the first frame reveal inferred callers starting at trace start") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x3010), Ret(10, 0x3050, 0x2020), Call(20, 0x2030, 0x4000),
               Ret(30, 0x4050, 0x2035), Ret(40, 0x2060, 0x1030), End(50)}) ==
        "main* 0-50\n"
        "  a* 0-40\n"
        "    b* 0-10\n"
        "    c 20-30\n");
  CHECK(h.tracker.stats()[Stat::kInferredFrames] == 3);
}

TEST_CASE("Finish closes what is open at the end time") {
  Harness h;
  h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000)});
  h.tracker.Finish(100);
  CHECK(h.sink.Tree() ==
        "main* 0-100\n"
        "  a 10-100\n");
}

TEST_CASE("recursion deeper than max_depth is folded with an instant") {
  StackTrackerOptions options;
  options.max_depth = 3;
  Harness h(options);
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x6000), Call(20, 0x6010, 0x6000),
               Call(30, 0x6010, 0x6000), Call(40, 0x6010, 0x6000), Ret(50, 0x6050, 0x6015),
               Ret(60, 0x6050, 0x6015), Ret(70, 0x6050, 0x6015), Ret(80, 0x6050, 0x1015),
               End(90)}) ==
        "main* 0-90\n"
        "  rec 10-80\n"
        "    rec 20-70\n"
        "      ! [folded] 2 deeper call levels not shown (max depth 3) @60\n");
  CHECK(h.tracker.stats()[Stat::kFoldedLevels] == 2);
  CHECK(h.tracker.stats()[Stat::kFoldedFrames] == 2);
}

TEST_CASE("folding is the same when the buffer is written out before the recursion") {
  // Flushes at the bound: the first buffers pass the depth cap unchanged, later ones are folded.
  StackTrackerOptions options;
  options.max_depth = 3;
  options.max_buffered_events = 2;
  Harness h(options);
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x6000), Call(20, 0x6010, 0x6000),
               Call(30, 0x6010, 0x6000), Call(40, 0x6010, 0x6000), Ret(50, 0x6050, 0x6015),
               Ret(60, 0x6050, 0x6015), Ret(70, 0x6050, 0x6015), Ret(80, 0x6050, 0x1015),
               End(90)}) ==
        "main* 0-90\n"
        "  rec 10-80\n"
        "    rec 20-70\n"
        "      ! [folded] 2 deeper call levels not shown (max depth 3) @60\n");
  CHECK(h.tracker.stats()[Stat::kFoldedFrames] == 2);
  CHECK(h.tracker.stats()[Stat::kBufferFlushesAtBound] > 0);
}

TEST_CASE("recursion past the default depth of 500") {
  Harness h;
  std::vector<FlowEvent> events{Enable(0, 0x1000), Call(1, 0x1010, 0x6000)};
  uint64_t t = 2;
  for (int i = 0; i < 501; ++i) events.push_back(Call(t++, 0x6010, 0x6000));  // 502 rec frames
  for (int i = 0; i < 501; ++i) events.push_back(Ret(t++, 0x6050, 0x6015));
  events.push_back(Ret(t++, 0x6050, 0x1015));
  events.push_back(End(t));
  std::string tree = h.Run(events);
  CHECK(h.sink.max_depth == 500);
  CHECK(h.tracker.stats()[Stat::kFoldedLevels] == 3);  // 1 main + 502 rec = 503 levels
  CHECK(h.tracker.stats()[Stat::kFoldedFrames] == 3);
  // Calls at t = 1..502; returns from t = 503: the 3rd (t = 505) closes the last hidden frame.
  CHECK(tree.find(std::string(2 * 500, ' ') +
                  "! [folded] 3 deeper call levels not shown (max depth 500) @505\n") !=
        std::string::npos);
  CHECK(std::count(tree.begin(), tree.end(), '\n') == 501);  // 500 slices + the instant
}

TEST_CASE("longjmp: a jump into a function deeper in the stack closes the frames above it") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Call(20, 0x2010, 0x3000),
               Call(30, 0x3010, 0x4000), Jmp(40, 0x4020, 0x1040), Call(50, 0x1050, 0x5000),
               Ret(60, 0x5010, 0x1055), End(70)}) ==
        "main* 0-70\n"
        "  a 10-40\n"
        "    b 20-40\n"
        "      c 30-40\n"
        "  d 50-60\n");
  CHECK(h.tracker.stats()[Stat::kUnwinds] == 1);
  CHECK(h.tracker.stats()[Stat::kUnwoundFrames] == 3);
}

TEST_CASE("a return to a deeper frame's return address closes every frame above it") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Call(20, 0x2010, 0x3000),
               Call(30, 0x3010, 0x4000), Ret(40, 0x4020, 0x1015), End(50)}) ==
        "main* 0-50\n"
        "  a 10-40\n"
        "    b 20-40\n"
        "      c 30-40\n");
}

TEST_CASE("exception: a return into a landing pad of a deeper frame unwinds to that frame") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Call(20, 0x2010, 0x3000),
               Call(30, 0x3010, 0x9000), Ret(40, 0x9050, 0x2080), Ret(50, 0x2090, 0x1015),
               End(60)}) ==
        "main* 0-60\n"
        "  a 10-50\n"
        "    b 20-40\n"
        "      __cxa_throw 30-40\n");
  CHECK(h.tracker.stats()[Stat::kUnwinds] == 1);
  CHECK(h.tracker.stats()[Stat::kUnwoundFrames] == 2);
}

TEST_CASE("tail call replaces the top frame; jumps inside a function do nothing") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Jmp(20, 0x2030, 0x2050),
               Jmp(30, 0x2060, 0x3000), Ret(40, 0x3050, 0x1015), End(50)}) ==
        "main* 0-50\n"
        "  a 10-30\n"
        "  b 30-40\n");
  CHECK(h.tracker.stats()[Stat::kTailCalls] == 1);
}

TEST_CASE("a jump into the middle of a function not on the stack replaces the top") {
  Harness h;  // like foo -> foo.cold -> foo
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Jmp(20, 0x2030, 0x3040),
               Jmp(30, 0x3050, 0x2060), Ret(40, 0x2070, 0x1015), End(50)}) ==
        "main* 0-50\n"
        "  a 10-20\n"
        "  b 20-30\n"
        "  a 30-40\n");
  CHECK(h.tracker.stats()[Stat::kLateralJumps] == 2);
}

TEST_CASE("syscalls and untraced regions are slices until tracing resumes") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Ev(K::kSyscall, 20, 0x2020),
               Enable(25, 0x2022), Ev(K::kDisable, 30, 0x2030), Enable(40, 0x2030),
               Ret(50, 0x2050, 0x1015), End(60)}) ==
        "main* 0-60\n"
        "  a 10-50\n"
        "    [syscall] 20-25\n"
        "    [untraced] 30-40\n");
}

TEST_CASE("tracing resuming at a return address closes the untraced callee") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0xf000), Ev(K::kDisable, 12, 0xf000),
               Enable(20, 0x1015), End(30)}) ==
        "main* 0-30\n"
        "  0xf000 10-20\n"
        "    [untraced] 12-20\n");
}

TEST_CASE("resuming where tracing stopped closes nothing, even at a frame's return address") {
  // rec calls itself at 0x6010 (return address 0x6015). The thread is preempted (an asynchronous
  // kDisable at 0x6015, as the flow decoder writes it) right after the inner rec returned: the
  // outer rec runs there, and 0x6015 is also its own return address. Tracing resumes at 0x6015;
  // the outer rec returns later.
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x6000), Call(20, 0x6010, 0x6000),
               Call(25, 0x6010, 0x6000), Ret(30, 0x6050, 0x6015),
               Ev(K::kDisable, 35, 0x6015), Enable(40, 0x6015),
               Ret(45, 0x6050, 0x6015), Ret(50, 0x6050, 0x1015), End(60)}) ==
        "main* 0-60\n"
        "  rec 10-50\n"
        "    rec 20-45\n"
        "      rec 25-30\n"
        "      [untraced] 35-40\n");
  CHECK(h.tracker.stats()[Stat::kUnwinds] == 0);
}

TEST_CASE("a return that leaves traced code still closes its frame where tracing resumes") {
  // The inner rec's ret leaves traced code (a kDisable whose `to` is the return's target, 0x6015,
  // the return address of both rec frames); tracing resumes there: the inner rec has returned.
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x6000), Call(20, 0x6010, 0x6000),
               Ev(K::kDisable, 30, 0x6050, 0x6015), Enable(40, 0x6015),
               Ret(50, 0x6050, 0x1015), End(60)}) ==
        "main* 0-60\n"
        "  rec 10-50\n"
        "    rec 20-40\n"
        "      [untraced] 30-40\n");
}

TEST_CASE("signal handler nests under the interrupted frame until sigreturn resumes it") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000),
               Ev(K::kAsync, 20, 0x2030, 0x7000), Call(25, 0x7010, 0x4000),
               Ret(30, 0x4010, 0x7015), Ret(35, 0x7050, 0x8000), Ev(K::kSyscall, 40, 0x8005),
               Enable(45, 0x2030), Ret(50, 0x2050, 0x1015), End(60)}) ==
        "main* 0-60\n"
        "  a 10-50\n"
        "    handler 20-35\n"
        "      c 25-30\n"
        "    __restore_rt 35-45\n"
        "      [syscall] 40-45\n");
  CHECK(h.tracker.stats()[Stat::kAsyncHandlers] == 1);
}

TEST_CASE("a handler returning straight to the interrupted ip closes it") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000),
               Ev(K::kAsync, 20, 0x2030, 0x7000), Ret(30, 0x7050, 0x2030),
               Ret(40, 0x2050, 0x1015), End(50)}) ==
        "main* 0-50\n"
        "  a 10-40\n"
        "    handler 20-30\n");
}

TEST_CASE("user-only tracing: a signal at syscall exit enters the handler on resumption") {
  Harness h;  // syscall at 0x2030 resumes at 0x2032; tracing comes back at the handler's entry
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Ev(K::kSyscall, 20, 0x2030),
               Enable(25, 0x7000), Ret(30, 0x7050, 0x8000), Ev(K::kSyscall, 35, 0x8005),
               Enable(40, 0x2032), Ret(50, 0x2050, 0x1015), End(60)}) ==
        "main* 0-60\n"
        "  a 10-50\n"
        "    [syscall] 20-25\n"
        "    handler 25-30\n"
        "    __restore_rt 30-40\n"
        "      [syscall] 35-40\n");
  CHECK(h.tracker.stats()[Stat::kAsyncHandlers] == 1);
}

TEST_CASE("resuming at the resume ip is no handler, even at a function's entry") {
  // a tail-jumps out of traced code to b's entry (a kDisable whose `to` is 0x3000), and tracing
  // resumes there: b's entry is where tracing was to resume, not a signal handler's.
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Ev(K::kDisable, 20, 0x2030, 0x3000),
               Enable(25, 0x3000), Ret(40, 0x2050, 0x1015), End(50)}) ==
        "main* 0-50\n"
        "  a 10-40\n"
        "    [untraced] 20-25\n");
  CHECK(h.tracker.stats()[Stat::kAsyncHandlers] == 0);
}

TEST_CASE("a handler entered after kDisable resumes at the disable's resume ip") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Ev(K::kDisable, 20, 0x2030, 0x2034),
               Enable(25, 0x7000), Ret(30, 0x7050, 0x2034), Ret(40, 0x2050, 0x1015), End(50)}) ==
        "main* 0-50\n"
        "  a 10-40\n"
        "    [untraced] 20-25\n"
        "    handler 25-30\n");
}

TEST_CASE("a call from outside the top frame's function replaces it with the caller, inferred") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Call(20, 0x3010, 0x4000),
               Ret(30, 0x4050, 0x3015), Ret(40, 0x3050, 0x1015), End(50)}) ==
        "main* 0-50\n"
        "  a 10-20\n"
        "  b* 20-40\n"
        "    c 20-30\n");
  CHECK(h.tracker.stats()[Stat::kCorrectedCallers] == 1);
}

TEST_CASE("a gap closes everything with an instant and restarts inference; triggers are instants") {
  Harness h;
  FlowEvent gap = Ev(K::kGap, 30);
  gap.gap_cause = GapCause::kOverflow;
  gap.detail = "4096 bytes";
  FlowEvent trigger = Ev(K::kTrigger, 55, 0, 0x5040);
  trigger.detail = "usr2";
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Call(20, 0x2010, 0x3000), gap,
               Enable(40, 0x4010), Ret(50, 0x4050, 0x5020), trigger, End(60)}) ==
        "main* 0-30\n"
        "  a 10-30\n"
        "    b 20-30\n"
        "! [gap] overflow: 4096 bytes @30\n"
        "d* 30-60\n"
        "  c* 30-50\n"
        "  ! [trigger] usr2 @55\n");
  CHECK(h.tracker.stats().gaps() == 0);  // gaps are the decoder's count, not the tracker's
  CHECK(h.tracker.stats()[Stat::kTriggers] == 1);
}

TEST_CASE("many instants in one buffer keep their texts") {
  Harness h;
  std::vector<FlowEvent> events{Enable(0, 0x1000), Call(1, 0x1010, 0x2000)};
  std::string expected = "main* 0-2000\n  a 1-2000\n";
  for (int i = 0; i < 1000; ++i) {
    FlowEvent trigger = Ev(K::kTrigger, 2 + i, 0, 0x2040);
    trigger.detail = "mark " + std::to_string(i);
    events.push_back(trigger);
    expected += "    ! [trigger] mark " + std::to_string(i) + " @" + std::to_string(2 + i) + "\n";
  }
  events.push_back(End(2000));
  CHECK(h.Run(events) == expected);
}

TEST_CASE("a return that matches no frame re-anchors the stack") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Call(20, 0x2010, 0x3000),
               Ret(30, 0x3050, 0x5020), Ret(40, 0x5030, 0x1090), End(50)}) ==
        "main* 0-30\n"
        "  a 10-30\n"
        "    b 20-30\n"
        "main* 30-50\n"
        "  d* 30-40\n");
  CHECK(h.tracker.stats()[Stat::kReanchors] == 1);
}

// b (entered at 0x3000) calls c and d, then returns into a, which the trace never showed.
std::vector<FlowEvent> BCallsCAndDThenReturnsToA() {
  return {Enable(0, 0x3000), Call(10, 0x3010, 0x4000), Ret(20, 0x4050, 0x3015),
          Call(30, 0x3020, 0x5000), Ret(40, 0x5050, 0x3025), Ret(50, 0x3050, 0x2020),
          End(60)};
}

TEST_CASE("past the buffer bound, later callers start where the written frames closed") {
  StackTrackerOptions options;
  options.max_buffered_events = 2;
  Harness h(options);
  CHECK(h.Run(BCallsCAndDThenReturnsToA()) ==
        "b* 0-50\n"
        "  c 10-20\n"
        "  d 30-40\n"
        "a* 50-60\n");
  CHECK(h.tracker.stats()[Stat::kBufferFlushesAtBound] == 2);
}

TEST_CASE("the same trace within the buffer bound wraps the first frame in its caller") {
  Harness h;
  CHECK(h.Run(BCallsCAndDThenReturnsToA()) ==
        "a* 0-60\n"
        "  b* 0-50\n"
        "    c 10-20\n"
        "    d 30-40\n");
}

TEST_CASE("inlined frames at the call site wrap the callee") {
  Harness h;
  h.namer.AddInlined(0x1010, {{"helper", "h.h", 3}, {"inner", "h.h", 9}});
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Ret(20, 0x2050, 0x1015),
               Call(30, 0x1020, 0x2000), Ret(40, 0x2050, 0x1025), End(50)}) ==
        "main* 0-50\n"
        "  helper (inlined) 10-20\n"
        "    inner (inlined) 10-20\n"
        "      a 10-20\n"
        "  a 30-40\n");
  CHECK(h.tracker.stats()[Stat::kInlinedSlices] == 2);
}

// The tracker remembers per call site its function and last callee, and the last jump target:
// a site or target seen again must still get its wrappers, its new callee, its correction, and
// a jump to the same target from another function must still unwind.
TEST_CASE("a call site seen before still wraps, takes a new callee and corrects its caller") {
  Harness h;
  h.namer.AddInlined(0x1010, {{"helper", "h.h", 3}});
  CHECK(h.Run({Enable(0, 0x1000),
               Call(10, 0x1010, 0x2000), Ret(20, 0x2050, 0x1015),    // wrapped
               Call(30, 0x1010, 0x2000), Ret(40, 0x2050, 0x1015),    // wrapped again
               Call(50, 0x1020, 0x2000), Ret(60, 0x2050, 0x1025),
               Call(70, 0x1020, 0x3000), Ret(80, 0x3050, 0x1025),    // same site, new callee
               Call(90, 0x1020, 0x3000), Ret(100, 0x3050, 0x1025),
               Call(110, 0x1040, 0x2000), Call(112, 0x2010, 0x3000), Ret(114, 0x3050, 0x2015),
               Jmp(120, 0x2030, 0x4000),                             // tail call: a -> c
               Call(130, 0x2010, 0x3000),                            // a's site, c on top
               Ret(140, 0x3050, 0x2015), Ret(150, 0x2050, 0x1045), End(160)}) ==
        "main* 0-160\n"
        "  helper (inlined) 10-20\n"
        "    a 10-20\n"
        "  helper (inlined) 30-40\n"
        "    a 30-40\n"
        "  a 50-60\n"
        "  b 70-80\n"
        "  b 90-100\n"
        "  a 110-120\n"
        "    b 112-114\n"
        "  c 120-130\n"
        "  a* 130-150\n"
        "    b 130-140\n");
  CHECK(h.tracker.stats()[Stat::kCalls] == 8);
  CHECK(h.tracker.stats()[Stat::kReturns] == 8);
  CHECK(h.tracker.stats()[Stat::kInlinedSlices] == 2);
  CHECK(h.tracker.stats()[Stat::kCorrectedCallers] == 1);
  CHECK(h.tracker.stats()[Stat::kTailCalls] == 1);
}

TEST_CASE("a jump to the last jump's target from another function unwinds to it") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Jmp(20, 0x2030, 0x2010),
               Jmp(30, 0x2030, 0x2010), Call(40, 0x2040, 0x3000), Jmp(50, 0x3020, 0x2010),
               Ret(60, 0x2050, 0x1015), End(70)}) ==
        "main* 0-70\n"
        "  a 10-60\n"
        "    b 40-50\n");
  CHECK(h.tracker.stats()[Stat::kUnwinds] == 1);
  CHECK(h.tracker.stats()[Stat::kUnwoundFrames] == 1);
}

FlowEvent Inline(uint64_t t, uint64_t at, uint32_t depth) {
  FlowEvent e = Ev(K::kInlineChange, t, at, at);
  e.inline_depth = depth;
  return e;
}

TEST_CASE("kInlineChange opens inlined slices inside the frame, around its callees") {
  Harness h;
  h.namer.AddInlined(0x2010, {{"helper", "h.h", 3}, {"inner", "h.h", 9}});
  h.namer.AddInlined(0x2018, {{"helper", "h.h", 3}, {"inner", "h.h", 9}});
  h.namer.AddInlined(0x201d, {{"helper", "h.h", 3}, {"inner", "h.h", 9}});  // b returns here
  h.namer.AddInlined(0x2040, {{"other", "o.h", 1}});
  // Depth 2 at 0x2010, a call from inlined code (no call-site wrappers: already open), back to
  // depth 0 at 0x2030, then depth 1 at 0x2040 until a returns.
  CHECK(h.Run({Enable(0, 0x1000), Call(5, 0x1005, 0x2000), Inline(6, 0x2010, 2),
               Inline(7, 0x2018, 2), Call(10, 0x2018, 0x3000), Ret(20, 0x3050, 0x201d),
               Inline(25, 0x2030, 0), Inline(28, 0x2040, 1), Ret(30, 0x2050, 0x100a),
               End(40)}) ==
        "main* 0-40\n"
        "  a 5-30\n"
        "    helper (inlined) 6-25\n"
        "      inner (inlined) 6-25\n"
        "        b 10-20\n"
        "    other (inlined) 28-30\n");
  CHECK(h.tracker.stats()[Stat::kInlinedSlices] == 3);
}

TEST_CASE("a return that lands outside the caller's inlined code closes its inlined slices") {
  // The call was made from inlined code (depth 1); the callee ran at depth 0 and returns to an
  // address at depth 0, so the flow decoder restates nothing (zero on both sides): the tracker
  // closes the caller's inlined slice itself, at the return.
  Harness h;
  h.namer.AddInlined(0x2010, {{"helper", "h.h", 3}});
  h.namer.AddInlined(0x2018, {{"helper", "h.h", 3}});
  CHECK(h.Run({Enable(0, 0x1000), Call(5, 0x1005, 0x2000), Inline(6, 0x2010, 1),
               Call(10, 0x2018, 0x3000), Ret(20, 0x3050, 0x201d), Call(22, 0x2020, 0x4000),
               Ret(26, 0x4010, 0x2025), Ret(30, 0x2050, 0x100a), End(40)}) ==
        "main* 0-40\n"
        "  a 5-30\n"
        "    helper (inlined) 6-20\n"
        "      b 10-20\n"
        "    c 22-26\n");
}

TEST_CASE("inlined slices opened by kInlineChange close at a tail call and at a gap") {
  Harness h;
  h.namer.AddInlined(0x2010, {{"helper", "h.h", 3}});
  h.namer.AddInlined(0x3010, {{"other", "o.h", 1}});
  FlowEvent gap = Ev(K::kGap, 30);
  gap.gap_cause = GapCause::kOverflow;
  gap.detail = "x";
  CHECK(h.Run({Enable(0, 0x1000), Call(5, 0x1005, 0x2000), Inline(10, 0x2010, 1),
               Jmp(20, 0x2020, 0x3000), Inline(26, 0x3010, 1), gap, End(40)}) ==
        "main* 0-30\n"
        "  a 5-20\n"
        "    helper (inlined) 10-20\n"
        "  b 20-30\n"
        "    other (inlined) 26-30\n"
        "! [gap] overflow: x @30\n");
}

// A decode unit that continues another states the inlined depth of its first block, which the
// unit before it may already have opened (join/unit_join.h): the same tree either way.
TEST_CASE("a statement of the inlined depth already open changes nothing") {
  auto run = [](bool restate) {
    Harness h;
    h.namer.AddInlined(0x2010, {{"helper", "h.h", 3}});
    h.namer.AddInlined(0x2018, {{"helper", "h.h", 3}});
    std::vector<FlowEvent> events = {Enable(0, 0x1000), Call(5, 0x1005, 0x2000),
                                     Inline(6, 0x2010, 1)};
    if (restate) events.push_back(Inline(8, 0x2018, 1));  // depth 1 stated again
    for (FlowEvent e : {Call(10, 0x2018, 0x3000), Ret(20, 0x3050, 0x201d)}) events.push_back(e);
    if (restate) events.push_back(Inline(21, 0x2020, 0));  // depth 0, back in a
    FlowEvent gap = Ev(K::kGap, 30);
    gap.gap_cause = GapCause::kOverflow;
    events.push_back(gap);
    if (restate) events.push_back(Inline(32, 0x4010, 0));  // nothing open: no frame either
    events.push_back(Ret(35, 0x3050, 0x1015));
    events.push_back(End(40));
    return h.Run(events);
  };
  const std::string tree = run(false);
  CHECK(tree ==
        "main* 0-30\n"
        "  a 5-30\n"
        "    helper (inlined) 6-20\n"
        "      b 10-20\n"
        "! [gap] overflow @30\n"
        "main* 30-40\n"
        "  b* 30-35\n");
  CHECK(run(true) == tree);
}

TEST_CASE("unknown ips at the start do not invent frames") {
  // Tracing starts disabled with no ip, then enables in a: no "0x0" frame; the inferred frames
  // start at the trace start and wrap the untraced slice.
  Harness h;
  CHECK(h.Run({Ev(K::kDisable, 0, 0, 0), Enable(10, 0), Enable(20, 0x2010),
               Ret(30, 0x2050, 0x1015), End(40)}) ==
        "main* 0-40\n"
        "  a* 0-30\n"
        "    [untraced] 0-10\n");
}

TEST_CASE("times going backwards are clamped") {
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Ret(5, 0x2050, 0x1015),
               End(20)}) ==
        "main* 0-20\n"
        "  a 10-10\n");
  CHECK(h.tracker.stats()[Stat::kClampedTimes] == 1);
}

TEST_CASE("a branch whose target the trace never gives (to = 0) invents no frame") {
  // The trace stops at a return (its target not yet in any packet), or tracing stops at a call:
  // the return still ends its frame, the caller is kept, and a call of an unknown target opens
  // nothing (no "0x0" slice, no re-anchoring that would close the whole stack).
  Harness h;
  CHECK(h.Run({Enable(0, 0x1000), Call(10, 0x1010, 0x2000), Call(20, 0x2010, 0x3000),
               Ret(30, 0x3050, 0), Call(40, 0x2020, 0), End(50)}) ==
        "main* 0-50\n"
        "  a 10-50\n"
        "    b 20-30\n");
  CHECK(h.tracker.stats()[Stat::kReanchors] == 0);
  Harness bottom;  // the inferred bottom frame returning somewhere unknown stays open
  CHECK(bottom.Run({Enable(0, 0x2000), Ret(10, 0x2050, 0), Call(20, 0x2060, 0x3000),
                    Ret(30, 0x3050, 0x2065), End(40)}) ==
        "a* 0-40\n"
        "  b 20-30\n");
}

}  // namespace
}  // namespace ptscope::decode

namespace ptscope::decode {
namespace {

TEST_CASE("held-back records in the spill file come back in order under a caller found late") {
  // Blocks of 2 records: the calls of b and c go to the file before the return that reveals a,
  // whose inferred slice must still start at the trace start and wrap them.
  RecordSpill spill(2, 0, 0);
  StackTrackerOptions options;
  options.spill = &spill;
  Harness h(options);
  CHECK(h.Run(BCallsCAndDThenReturnsToA()) ==
        "a* 0-60\n"
        "  b* 0-50\n"
        "    c 10-20\n"
        "    d 30-40\n");
  CHECK(spill.blocks_stored() >= 2);
  CHECK(spill.error().empty());
}

// Runs `events` through a tracker with `options` and returns the tree and the stats.
std::pair<std::string, DecodeStats> TreeOf(const std::vector<FlowEvent>& events,
                                           StackTrackerOptions options, uint64_t end) {
  Harness h(options);
  h.namer.AddInlined(0x1010, {{"inl", "i.h", 1}});
  for (const FlowEvent& e : events) h.tracker.OnEvent(e);
  h.tracker.Finish(end);
  CHECK(h.sink.violations.empty());
  return {h.sink.Tree(), h.tracker.stats()};
}

std::vector<FlowEvent> RandomEvents(uint64_t seed, int count, uint64_t* end) {
  uint64_t state = seed, t = 0;
  auto next = [&state](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  const uint64_t kAddrs[] = {0x1010, 0x1015, 0x2000, 0x2015, 0x3000, 0x3040, 0x6000, 0x6015,
                             0x7000, 0x8000, 0xf000, 0};
  std::vector<FlowEvent> events;
  for (int i = 0; i < count; ++i) {
    // Kinds 0..9 but kGap and kEnd rarer (they flush): long stretches stay held back.
    K kind = static_cast<K>(next(10));
    if ((kind == K::kGap || kind == K::kEnd) && next(20) != 0) kind = K::kCall;
    FlowEvent e = Ev(kind, t += next(3), kAddrs[next(12)], kAddrs[next(12)]);
    e.call_size = 5;
    e.gap_cause = static_cast<GapCause>(next(4));
    if (kind == K::kTrigger && next(2) == 0) e.detail = "mark " + std::to_string(i);
    events.push_back(e);
  }
  *end = t + 1;
  return events;
}

TEST_CASE("spilling held-back records changes no slice, instant or count") {
  uint64_t end = 0;
  const std::vector<FlowEvent> events = RandomEvents(777, 20000, &end);
  for (uint32_t max_depth : {8u, 500u}) {
    for (size_t bound : {size_t{5}, size_t{300}, size_t{1} << 20}) {
      StackTrackerOptions options;
      options.max_depth = max_depth;
      options.max_buffered_events = bound;
      const auto [tree, stats] = TreeOf(events, options, end);
      for (size_t block : {size_t{1}, size_t{3}, size_t{64}}) {
        // Where blocks wait: all in the file; encoded, a few blocks' worth in memory, the rest
        // in the file; all encoded in memory; as they are (raw), two blocks' worth, the rest in
        // the file; all raw.
        const size_t raw2 = 2 * block * sizeof(SliceRecord);
        for (auto [raw, encoded] : {std::pair<size_t, size_t>{0, 0}, {0, 200}, {0, SIZE_MAX},
                                    {raw2, 0}, {SIZE_MAX, 0}}) {
          CAPTURE(max_depth);
          CAPTURE(bound);
          CAPTURE(block);
          CAPTURE(raw);
          CAPTURE(encoded);
          RecordSpill spill(block, raw, encoded);
          options.spill = &spill;
          const auto [spilled_tree, spilled_stats] = TreeOf(events, options, end);
          CHECK(spilled_tree == tree);
          CHECK(spilled_stats.counts == stats.counts);
          CHECK(spill.error().empty());
          if (block < bound) CHECK(spill.blocks_stored() > 0);
          if (block < bound && raw == 0 && encoded == 0) {
            CHECK(spill.blocks_in_file() == spill.blocks_stored());
          }
          if (raw == SIZE_MAX) CHECK(spill.blocks_raw() == spill.blocks_stored());
          if (raw == 0) CHECK(spill.blocks_raw() == 0);
          if (encoded == SIZE_MAX || raw == SIZE_MAX) CHECK(spill.blocks_in_file() == 0);
          if (raw == raw2 && 3 * block < bound) {
            CHECK(spill.blocks_raw() > 0);
            CHECK(spill.blocks_in_file() > 0);
          }
          if (2 * block < bound) CHECK(spill.peak_blocks() > 1);
        }
      }
    }
  }
}

TEST_CASE("a spill file that cannot be created keeps the records in memory, same tree") {
  uint64_t end = 0;
  const std::vector<FlowEvent> events = RandomEvents(99, 5000, &end);
  StackTrackerOptions options;
  options.max_depth = 8;
  const auto [tree, stats] = TreeOf(events, options, end);
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before != nullptr ? before : "";
  setenv("TMPDIR", "/nonexistent/ptscope-spill-test", 1);
  RecordSpill spill(4, 0, 0);
  options.spill = &spill;
  const auto [kept_tree, kept_stats] = TreeOf(events, options, end);
  if (before != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  CHECK(kept_tree == tree);
  CHECK(spill.blocks_stored() > 0);  // encoded, kept in memory past the budget of 0 bytes
  CHECK(spill.blocks_raw() == 0);
  CHECK(spill.blocks_in_file() == 0);
  CHECK(spill.error().empty());
}

// A sole writer holds back only settled_records once a written-out frame is open: the same
// slices, instants and counts (but for flushes at the bound: only the first of each stretch
// changes where later callers start, and only those are counted), with or without a spill.
TEST_CASE("a sole writer writes settled records early and changes no slice, instant or count") {
  uint64_t end = 0;
  const std::vector<FlowEvent> events = RandomEvents(4242, 20000, &end);
  int settled_runs = 0;
  for (size_t bound : {size_t{5}, size_t{300}, size_t{1} << 20}) {
    StackTrackerOptions options;
    options.max_depth = 8;
    options.max_buffered_events = bound;
    const auto [tree, stats] = TreeOf(events, options, end);
    for (size_t settled : {size_t{1}, size_t{3}, size_t{4096}}) {
      for (bool spilled : {false, true}) {
        CAPTURE(bound);
        CAPTURE(settled);
        CAPTURE(spilled);
        RecordSpill spill(2, 0, 0);
        StackTrackerOptions sole = options;
        sole.sole_writer = true;
        sole.settled_records = settled;
        if (spilled) sole.spill = &spill;
        const auto [sole_tree, sole_stats] = TreeOf(events, sole, end);
        CHECK(sole_tree == tree);
        for (size_t i = 0; i < kStatCount; ++i) {
          if (static_cast<Stat>(i) == Stat::kBufferFlushesAtBound) continue;
          CAPTURE(i);
          CHECK(sole_stats[static_cast<Stat>(i)] == stats[static_cast<Stat>(i)]);
        }
        CHECK(sole_stats[Stat::kBufferFlushesAtBound] <= stats[Stat::kBufferFlushesAtBound]);
        if (sole_stats[Stat::kBufferFlushesAtBound] < stats[Stat::kBufferFlushesAtBound]) {
          ++settled_runs;  // records were written early: the case under test happened
        }
        CHECK(spill.error().empty());
      }
    }
  }
  // Bound 5, every settled size, with and without a spill (300 records are seldom held twice in
  // a row between these events' gaps and re-anchors).
  CHECK(settled_runs >= 6);
}

// Counts the records that reached it (through the default WriteRecords: one call each).
class CountingSink : public testing::TreeSink {
 public:
  using TreeSink::TreeSink;
  void Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
             bool inferred) override {
    ++received;
    TreeSink::Begin(thread, time_ns, frame, inferred);
  }
  void End(const ThreadKey& thread, uint64_t time_ns) override {
    ++received;
    TreeSink::End(thread, time_ns);
  }
  size_t received = 0;
};

// main (0x1000) stays open under 200 calls of a, each a Begin and an End: what the tracker held
// back at the most once the sink had any record, what it had written before Finish, and its
// flushes at the bound. Checks the tree, which is the same whatever the options.
struct HeldBack {
  size_t most = 0;
  size_t before_finish = 0;
  uint64_t bound_flushes = 0;
};
HeldBack RunMainCallingA(const StackTrackerOptions& options, uint64_t program_entry) {
  FakeNamer namer(Functions());
  namer.program_entry = program_entry;
  CountingSink sink(namer);
  StackTracker tracker(ThreadKey{7, 8}, namer, sink, options);
  tracker.OnEvent(Enable(0, 0x1000));
  HeldBack held;
  size_t made = 0;
  uint64_t t = 0;
  for (int i = 0; i < 200; ++i) {
    tracker.OnEvent(Call(t += 10, 0x1010, 0x2000));
    tracker.OnEvent(Ret(t += 10, 0x2050, 0x1015));
    made = 1 + 2 * (i + 1);  // main's inferred Begin, then a's Begin and End
    if (sink.received > 0) held.most = std::max(held.most, made - sink.received);
  }
  held.before_finish = sink.received;
  held.bound_flushes = tracker.stats()[Stat::kBufferFlushesAtBound];
  tracker.Finish(t + 10);
  CHECK(sink.received == made + 1);  // and main's End
  CHECK(sink.violations.empty());
  std::string expected = "main* 0-" + std::to_string(t + 10) + "\n";
  for (uint64_t call = 10; call < t; call += 20) {
    expected += "  a " + std::to_string(call) + "-" + std::to_string(call + 10) + "\n";
  }
  CHECK(sink.Tree() == expected);
  return held;
}

// After the first flush at the bound of 64, a sole writer holds at most settled_records (4) and
// one event's records back; another tracker holds up to 64 again.
TEST_CASE("once its bottom frame is written out, a sole writer holds back only settled records") {
  StackTrackerOptions options;
  options.max_buffered_events = 64;
  options.settled_records = 4;
  const HeldBack shared = RunMainCallingA(options, 0);
  CHECK(shared.most >= 60);
  CHECK(shared.bound_flushes == 6);
  options.sole_writer = true;
  const HeldBack sole = RunMainCallingA(options, 0);
  CHECK(sole.before_finish > 0);
  CHECK(sole.most <= 4 + 2);
  CHECK(sole.bound_flushes == 1);
}

// A thread that starts at its program's entry point has no caller to infer: a sole writer writes
// its bottom frame at once and holds back only settled records from then on; another tracker
// holds everything back to the bound (2^20 here: to Finish).
TEST_CASE("a thread started at its program's entry is written out from its first frame on") {
  StackTrackerOptions options;
  options.settled_records = 4;
  const HeldBack shared = RunMainCallingA(options, 0x1000);
  CHECK(shared.before_finish == 0);
  CHECK(shared.bound_flushes == 0);
  options.sole_writer = true;
  const HeldBack sole = RunMainCallingA(options, 0x1000);
  CHECK(sole.before_finish > 0);
  CHECK(sole.most <= 4 + 2);
  CHECK(sole.bound_flushes == 0);
  // Not at its entry: held back like any thread's.
  CHECK(RunMainCallingA(options, 0x1010).before_finish == 0);
}

// Were the entry's frame to return all the same, its caller starts at that return, as after a
// flush at the bound ("past the buffer bound, ..." above), instead of wrapping the thread.
TEST_CASE("an entry frame that returns all the same gets a caller from that return on") {
  StackTrackerOptions options;
  options.sole_writer = true;
  // Entered at b's entry: written out at once, a starts at the return. Entered elsewhere (the
  // entry is b's call site): held back, and a wraps b from the trace start.
  const std::pair<uint64_t, const char*> cases[] = {
      {0x3000, "b* 0-50\n  c 10-20\n  d 30-40\na* 50-60\n"},
      {0x3010, "a* 0-60\n  b* 0-50\n    c 10-20\n    d 30-40\n"}};
  for (const auto& [entry, tree] : cases) {
    CAPTURE(entry);
    Harness h(options);
    h.namer.program_entry = entry;
    CHECK(h.Run(BCallsCAndDThenReturnsToA()) == tree);
    CHECK(h.tracker.stats()[Stat::kBufferFlushesAtBound] == 0);
  }
}

// Property: whatever the event sequence, slices nest, close, never exceed max_depth, and times
// never go back. A fixed-seed generator keeps it deterministic.
TEST_CASE("random event sequences always give a well-formed slice stream") {
  for (size_t bound : {size_t{3}, size_t{1} << 20}) {
    StackTrackerOptions options;
    options.max_depth = 8;
    options.max_buffered_events = bound;
    Harness h(options);
    h.namer.AddInlined(0x1010, {{"inl", "i.h", 1}});
    uint64_t state = 12345, t = 0;
    auto next = [&state](uint64_t n) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return (state >> 33) % n;
    };
    const uint64_t kAddrs[] = {0x1010, 0x1015, 0x2000, 0x2015, 0x3000, 0x3040, 0x6000, 0x6015,
                               0x7000, 0x8000, 0xf000, 0};
    for (int i = 0; i < 20000; ++i) {
      FlowEvent e = Ev(static_cast<K>(next(10)), t += next(3), kAddrs[next(12)], kAddrs[next(12)]);
      e.call_size = 5;
      e.gap_cause = static_cast<GapCause>(next(4));
      h.tracker.OnEvent(e);
    }
    h.tracker.Finish(t + 1);
    CHECK(h.sink.violations.empty());
    CHECK(h.sink.max_depth == 8);  // reached, never exceeded
    std::string tree = h.sink.Tree();
    CHECK(tree.find("(unclosed") == std::string::npos);
    CHECK(tree.find("! [folded]") != std::string::npos);
    // The sequence exercised the interesting paths.
    const DecodeStats& c = h.tracker.stats();
    CHECK(c[Stat::kUnwinds] > 0);
    CHECK(c[Stat::kTailCalls] + c[Stat::kLateralJumps] > 0);
    CHECK(c[Stat::kReanchors] > 0);
    CHECK(c[Stat::kAsyncHandlers] > 0);
    CHECK(c[Stat::kCorrectedCallers] > 0);
    CHECK(c[Stat::kFoldedFrames] > 0);
    if (bound == 3) CHECK(c[Stat::kBufferFlushesAtBound] > 0);
  }
}

}  // namespace
}  // namespace ptscope::decode
