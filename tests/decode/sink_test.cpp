// Sinks: factory errors, write errors, and the tracker feeding a TextSink end to end.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fake_frames.h"
#include "sink/sink_factory.h"
#include "stack/stack_tracker.h"

namespace ptscope::decode {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ptscope_sink_test_" + std::to_string(getpid()) + "_" + name))
      .string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("sink factory: formats by name and by path, clear errors") {
  testing::FakeNamer namer({});
  auto bad = CreateSink("xml", "-", namer);
  REQUIRE(!bad);
  CHECK(bad.error().message ==
        "output format 'xml' is unknown: use perfetto, text, folded, summary, summary-json or "
        "speedscope");
  CHECK(ParseSinkFormat("summary").value() == SinkFormat::kSummary);
  CHECK(ParseSinkFormat("summary-json").value() == SinkFormat::kSummaryJson);
  auto unwritable = CreateSink("text", "/nonexistent-ptscope-dir/out.txt", namer);
  REQUIRE(!unwritable);
  CHECK(unwritable.error().code == Errc::kNotFound);
  CHECK(unwritable.error().message ==
        "/nonexistent-ptscope-dir/out.txt: cannot create a temporary file in "
        "/nonexistent-ptscope-dir: No such file or directory");
  CHECK(SinkFormatForPath("trace.txt") == SinkFormat::kText);
  CHECK(SinkFormatForPath("trace.summary.txt") == SinkFormat::kSummary);
  CHECK(SinkFormatForPath("trace.summary.txt.gz") == SinkFormat::kSummary);
  CHECK(SinkFormatForPath("trace.summary.json") == SinkFormat::kSummaryJson);
  CHECK(SinkFormatForPath("trace.json") == SinkFormat::kPerfetto);
  CHECK(SinkFormatForPath("trace.folded.gz") == SinkFormat::kFolded);
  CHECK(SinkFormatForPath("trace.speedscope.json") == SinkFormat::kSpeedscope);
  CHECK(ParseSinkFormat("speedscope").value() == SinkFormat::kSpeedscope);
  CHECK(SinkFormatForPath("trace.pftrace.gz") == SinkFormat::kPerfetto);
  CHECK(SinkFormatForPath("trace") == SinkFormat::kPerfetto);
}

TEST_CASE("a full disk is reported by OutputError, not printed or ignored") {
  testing::FakeNamer namer({{"main", 0x1000}});
  auto sink = CreateSink("perfetto", "/dev/full", namer);
  REQUIRE(sink);
  (*sink)->Begin(ThreadKey{1, 1}, 10, FrameId{.address = 0x1000, .kind = FrameId::Kind::kFunction}, false);
  (*sink)->End(ThreadKey{1, 1}, 20);
  (*sink)->Finish();
  CHECK((*sink)->OutputError() == "/dev/full: write failed: No space left on device (the file "
                                   "system is full: free space or write elsewhere)");
}

// PerfettoSink writes runs of common records (begins of frames already encoded, ends) straight
// into its output buffer: the bytes must be those of the same records given one call at a time.
TEST_CASE("Perfetto: records written in runs give the bytes of one call per record") {
  testing::FakeNamer namer({{"main", 0x1000}, {"a", 0x2000}, {"b", 0x3000}});
  namer.AddInlined(0x1010, {{"helper", "h.h", 3}});
  const std::string gap = "[gap] lost data", trigger = "[trigger] usr2";
  const ThreadKey threads[2] = {{1, 1}, {1, 2}};
  auto fn = [](uint64_t address) {
    return FrameId{.address = address, .kind = FrameId::Kind::kFunction};
  };
  std::vector<SliceRecord> records[2];
  uint64_t seed = 12345;
  for (int thread = 0; thread < 2; ++thread) {
    uint64_t t = 1000;
    int open = 0;
    for (int i = 0; i < 5000; ++i) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      const uint64_t r = seed >> 33;
      // Mostly small steps, sometimes a long one (multi-byte deltas), sometimes back in time.
      t = r % 97 == 0 ? t + (r % 5000000) : r % 89 == 0 ? t - std::min<uint64_t>(t, 7) : t + r % 50;
      SliceRecord rec;
      rec.time_ns = t;
      if (r % 41 == 0) {
        rec.type = SliceRecord::Type::kInstant;
        rec.SetText(r % 2 ? &gap : &trigger);
      } else if ((r >> 12) % 2 == 0 || open > 20) {
        rec.type = SliceRecord::Type::kEnd;  // past the open ones sometimes: unmatched
        open = std::max(0, open - 1);
      } else {
        rec.type = SliceRecord::Type::kBegin;
        const uint64_t pick = (r >> 4) % 8;
        rec.frame = pick < 3   ? fn(0x1000 + 0x1000 * pick)
                    : pick < 5 ? FrameId{.address = 0x1010, .kind = FrameId::Kind::kInlined}
                    : pick < 6 ? FrameId{.address = 0, .kind = FrameId::Kind::kSyscall}
                               : fn(0x2000 + 0x1000 * (pick & 1));
        rec.inferred = (r >> 8) % 17 == 0;
        ++open;
      }
      records[thread].push_back(rec);
    }
  }
  const std::string runs_path = TempPath("runs.pftrace"), single_path = TempPath("single.pftrace");
  {
    auto runs = CreateSink("perfetto", runs_path, namer);
    auto single = CreateSink("perfetto", single_path, namer);
    REQUIRE(runs);
    REQUIRE(single);
    for (int thread = 0; thread < 2; ++thread) {
      (*runs)->BeginThread(threads[thread], "p", "t");
      (*single)->BeginThread(threads[thread], "p", "t");
    }
    // The threads interleaved in runs of varying length, one of them the whole rest.
    size_t next[2] = {0, 0};
    const size_t lengths[] = {1, 2, 700, 3, 4096, 31, 5000};
    for (size_t k = 0; next[0] < 5000 || next[1] < 5000; ++k) {
      const int thread = static_cast<int>(k % 2);
      const size_t count = std::min(lengths[k % 7], 5000 - next[thread]);
      const SliceRecord* first = records[thread].data() + next[thread];
      (*runs)->WriteRecords(threads[thread], first, count);
      for (const SliceRecord* r = first; r != first + count; ++r) {
        switch (r->type) {
          case SliceRecord::Type::kBegin:
            (*single)->Begin(threads[thread], r->time_ns, r->frame, r->inferred);
            break;
          case SliceRecord::Type::kEnd: (*single)->End(threads[thread], r->time_ns); break;
          case SliceRecord::Type::kInstant:
            (*single)->Instant(threads[thread], r->time_ns, *r->text());
            break;
        }
      }
      next[thread] += count;
    }
    (*runs)->Finish();
    (*single)->Finish();
    CHECK((*runs)->OutputError() == "");
    CHECK((*single)->OutputError() == "");
  }
  const std::string runs = ReadFile(runs_path), single = ReadFile(single_path);
  CHECK(single.size() > 100000);
  CHECK(runs == single);
  std::filesystem::remove(runs_path);
  std::filesystem::remove(single_path);
}

TEST_CASE("tracker into TextSink: threads in (pid, tid) order, flags and locations") {
  testing::FakeNamer namer({{"main", 0x1000}, {"a", 0x2000}});
  std::string path = TempPath("tree.txt");
  auto sink = CreateSink("text", path, namer);
  REQUIRE(sink);
  using K = FlowEvent::Kind;
  auto ev = [](K kind, uint64_t t, uint64_t from, uint64_t to) {
    FlowEvent e;
    e.kind = kind;
    e.time_ns = t;
    e.from = from;
    e.to = to;
    e.call_size = kind == K::kCall ? 5 : 0;
    return e;
  };
  // Thread 3/5 is fed first, but 3/4 is written first.
  StackTracker later(ThreadKey{3, 5}, namer, **sink);
  (*sink)->BeginThread(ThreadKey{3, 5}, "app", "worker");
  later.OnEvent(ev(K::kEnable, 0, 0, 0x2010));
  later.OnEvent(ev(K::kReturn, 7, 0x2020, 0x1030));
  later.Finish(9);
  StackTracker first(ThreadKey{3, 4}, namer, **sink);
  (*sink)->BeginThread(ThreadKey{3, 4}, "app", "app");
  first.OnEvent(ev(K::kEnable, 100, 0, 0x1000));
  first.OnEvent(ev(K::kCall, 110, 0x1010, 0x2000));
  first.OnEvent(ev(K::kSyscall, 120, 0x2040, 0));
  first.Finish(130);
  (*sink)->Finish();
  CHECK((*sink)->OutputError() == "");
  CHECK(ReadFile(path) ==
        "thread 3/4 \"app\" \"app\"\n"
        "  [100 +30] main (inferred)  main.c:1\n"
        "    [110 +20] a  a.c:1\n"
        "      [120 +10] [syscall]\n"
        "thread 3/5 \"app\" \"worker\"\n"
        "  [0 +9] main (inferred)  main.c:1\n"
        "    [0 +7] a (inferred)  a.c:1\n");
  std::filesystem::remove(path);
}

TEST_CASE("slices still open at Finish: text marks them unfinished, folded closes them") {
  testing::FakeNamer namer({{"main", 0x1000}, {"a", 0x2000}});
  std::string text_path = TempPath("open.txt");
  std::string folded_path = TempPath("open.folded");
  for (const std::string& path : {text_path, folded_path}) {
    auto sink = CreateSink(path == text_path ? "text" : "folded", path, namer);
    REQUIRE(sink);
    (*sink)->Begin(ThreadKey{1, 1}, 10, FrameId{.address = 0x1000, .kind = FrameId::Kind::kFunction}, false);
    (*sink)->Begin(ThreadKey{1, 1}, 20, FrameId{.address = 0x2000, .kind = FrameId::Kind::kFunction}, false);
    (*sink)->Instant(ThreadKey{1, 1}, 35, "[trigger]");
    (*sink)->End(ThreadKey{1, 2}, 40);  // a thread with nothing open: ignored
    (*sink)->Finish();
    CHECK((*sink)->OutputError() == "");
  }
  CHECK(ReadFile(text_path) ==
        "thread 1/1 \"\" \"\"\n"
        "  [10 +25] main  main.c:1 (unfinished)\n"
        "    [20 +15] a  a.c:1 (unfinished)\n"
        "      [35] ! [trigger]\n"
        "thread 1/2 \"\" \"\"\n");
  CHECK(ReadFile(folded_path) ==
        "main 10\n"
        "main;a 15\n");
  std::filesystem::remove(text_path);
  std::filesystem::remove(folded_path);
}

}  // namespace
}  // namespace ptscope::decode
