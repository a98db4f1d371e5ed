// Writes one small, hand-designed slice tree through a sink: `decode_sink_sample FORMAT PATH`.
// The golden test (sink_golden_test.sh) compares the output with hand-reviewed files in golden/.
//
// Process 7 "prog": thread 8 "main" and thread 9 "worker"; process 20: thread 20 (no names).
//   7/8: main (inferred) [100,200] > helper (inlined at 0x1010) [110,150] > a [110,150]
//        > [syscall] [120,130]; trigger instant at 160; a again [170,180]
//   7/9: b [105,140] > a [115,125]; gap instant at 150
//   20/20: c [50,60], then nodebug [60,65] (no debug info: module and address instead of a file)
// `decode_sink_sample deep PATH` instead runs a StackTracker into a PerfettoSink: main calls rec
// 600 levels deep (folded past 500), a gap, then a tail call and a signal handler.
#include <cstdio>
#include <string>

#include "fake_frames.h"
#include "sink/sink_factory.h"
#include "stack/stack_tracker.h"

using ptscope::decode::FlowEvent;
using ptscope::decode::FrameId;
using ptscope::decode::SliceSink;
using ptscope::decode::ThreadKey;

namespace {
FrameId Fn(uint64_t address) { return FrameId{.address = address, .kind = FrameId::Kind::kFunction}; }

void WriteSample(SliceSink& sink) {
  ThreadKey t8{7, 8}, t9{7, 9}, t20{20, 20};
  sink.BeginThread(t8, "prog", "main");
  sink.BeginThread(t9, "prog", "worker");
  sink.BeginThread(t20, "", "");
  sink.Begin(t20, 50, Fn(0x4000), false);
  sink.End(t20, 60);
  sink.Begin(t20, 60, Fn(0x6000), false);
  sink.End(t20, 65);
  sink.Begin(t8, 100, Fn(0x1000), true);
  sink.Begin(t9, 105, Fn(0x3000), false);
  sink.Begin(t8, 110, FrameId{.address = 0x1010, .kind = FrameId::Kind::kInlined}, false);
  sink.Begin(t8, 110, Fn(0x2000), false);
  sink.Begin(t9, 115, Fn(0x2000), false);
  sink.Begin(t8, 120, FrameId{.address = 0, .kind = FrameId::Kind::kSyscall}, false);
  sink.End(t9, 125);
  sink.End(t8, 130);
  sink.End(t9, 140);
  sink.End(t8, 150);
  sink.End(t8, 150);
  sink.Instant(t9, 150, "[gap] lost data: 64 bytes");
  sink.Instant(t8, 160, "[trigger] usr2");
  sink.Begin(t8, 170, Fn(0x2000), false);
  sink.End(t8, 180);
  sink.End(t8, 200);
  sink.Finish();
}
using ptscope::decode::testing::Ev;

void WriteDeep(SliceSink& sink, ptscope::decode::CodeFacts& code) {
  using K = FlowEvent::Kind;
  ThreadKey thread{30, 31};
  sink.BeginThread(thread, "deep", "deep");
  ptscope::decode::StackTracker tracker(thread, code, sink);
  uint64_t t = 1000;
  tracker.OnEvent(Ev(K::kEnable, t++, 0, 0x1000));
  tracker.OnEvent(Ev(K::kCall, t++, 0x1010, 0x5000));
  for (int i = 0; i < 599; ++i) tracker.OnEvent(Ev(K::kCall, t++, 0x5010, 0x5000));
  for (int i = 0; i < 599; ++i) tracker.OnEvent(Ev(K::kReturn, t++, 0x5050, 0x5015));
  FlowEvent gap = Ev(K::kGap, t++, 0, 0);
  gap.gap_cause = ptscope::decode::GapCause::kOverflow;
  tracker.OnEvent(gap);
  tracker.OnEvent(Ev(K::kEnable, t++, 0, 0x2010));
  tracker.OnEvent(Ev(K::kJump, t++, 0x2020, 0x3000));                // tail call a -> b
  tracker.OnEvent(Ev(K::kAsync, t++, 0x3010, 0x4000));               // signal into c
  tracker.OnEvent(Ev(K::kReturn, t++, 0x4050, 0x3010));              // handler returns
  tracker.OnEvent(Ev(K::kReturn, t++, 0x3050, 0x1040));              // b returns into main
  tracker.Finish(t);
  sink.Finish();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s perfetto|text|folded|summary|speedscope|deep PATH\n", argv[0]);
    return 2;
  }
  ptscope::decode::testing::FakeNamer namer(
      {{"main", 0x1000}, {"a", 0x2000}, {"b", 0x3000}, {"c", 0x4000}, {"rec", 0x5000},
       {"nodebug", 0x6000, false}});
  namer.AddInlined(0x1010, {{"helper", "helper.h", 7}});
  std::string format = std::string(argv[1]) == "deep" ? "perfetto" : argv[1];
  auto sink = ptscope::decode::CreateSink(format, argv[2], namer);
  if (!sink) {
    std::fprintf(stderr, "decode_sink_sample: %s\n", sink.error().message.c_str());
    return 1;
  }
  if (std::string(argv[1]) == "deep") {
    WriteDeep(**sink, namer);
  } else {
    WriteSample(**sink);
  }
  std::string error = (*sink)->OutputError();
  if (!error.empty()) {
    std::fprintf(stderr, "decode_sink_sample: %s\n", error.c_str());
    return 1;
  }
  // The sink names each frame once, and only the sink names: the tracker (in "deep" mode) asks
  // CodeFacts for function starts and inlined depths, never for a name.
  for (const auto& [address, calls] : namer.name_calls) {
    if (calls != 1) {
      std::fprintf(stderr, "decode_sink_sample: Name(0x%llx) called %d times, want once\n",
                   static_cast<unsigned long long>(address), calls);
      return 1;
    }
  }
  return 0;
}
