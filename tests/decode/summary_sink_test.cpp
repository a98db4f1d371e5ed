// SummarySink: exact per-function numbers (worked out by hand in the comments), recursion counted
// once in the inclusive time, instruction totals from the tracker, every level past max_depth,
// deterministic order, top N.
#include "sink/summary_sink.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fake_frames.h"
#include "stack/stack_tracker.h"

namespace ptscope::decode {
namespace {

using K = FlowEvent::Kind;

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ptscope_summary_test_" + std::to_string(getpid()) + "_" + name))
      .string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

FrameId Fn(uint64_t address) { return FrameId{.address = address, .kind = FrameId::Kind::kFunction}; }

testing::FakeNamer Namer() {
  return testing::FakeNamer({{"main", 0x1000}, {"a", 0x2000}, {"b", 0x3000}, {"rec", 0x6000}});
}

// Runs `write` into a SummarySink (top rows per table) and returns the table lines only:
// the two header lines are checked once, in the first test.
template <typename Write>
std::string Summarize(Write write, size_t top = 0, bool keep_header = false) {
  testing::FakeNamer namer = Namer();
  std::string path = TempPath("out.txt");
  auto out = OutputFile::Open(path);
  REQUIRE(out);
  SummarySink sink(std::move(*out), namer, top);
  write(sink, namer);
  sink.Finish();
  CHECK(sink.OutputError() == "");
  std::string text = ReadFile(path);
  std::filesystem::remove(path);
  if (keep_header) return text;
  return text.substr(text.find("\n\n") + 2);
}

std::string Row(uint64_t calls, uint64_t total, uint64_t self, uint64_t max,
                const std::string& name) {
  char line[200];
  std::snprintf(line, sizeof line, "%10llu %14llu %14llu %14llu  %s\n",
                static_cast<unsigned long long>(calls), static_cast<unsigned long long>(total),
                static_cast<unsigned long long>(self), static_cast<unsigned long long>(max),
                name.c_str());
  return line;
}
std::string Row(uint64_t calls, uint64_t total, uint64_t self, uint64_t max, uint64_t insns,
                uint64_t self_insns, const std::string& name) {
  char line[240];
  std::snprintf(line, sizeof line, "%10llu %14llu %14llu %14llu %14llu %14llu  %s\n",
                static_cast<unsigned long long>(calls), static_cast<unsigned long long>(total),
                static_cast<unsigned long long>(self), static_cast<unsigned long long>(max),
                static_cast<unsigned long long>(insns),
                static_cast<unsigned long long>(self_insns), name.c_str());
  return line;
}
const std::string kHeader = "     calls       total_ns        self_ns         max_ns  function [module]\n";
const std::string kInsnHeader =
    "     calls       total_ns        self_ns         max_ns          insns     self_insns  "
    "function [module]\n";

// Thread 1/1: main [0,100] > a [10,30] > b [15,25]; a [40,60]; b [70,75].
// Thread 1/2: b [0,50].
void WriteTwoThreads(SliceSink& sink) {
  ThreadKey t1{1, 1}, t2{1, 2};
  sink.BeginThread(t1, "prog", "main");
  sink.Begin(t1, 0, Fn(0x1000), true);
  sink.Begin(t1, 10, Fn(0x2000), false);
  sink.Begin(t1, 15, Fn(0x3000), false);
  sink.End(t1, 25);
  sink.End(t1, 30);
  sink.Begin(t1, 40, Fn(0x2000), false);
  sink.End(t1, 60);
  sink.Instant(t1, 65, "[trigger]");
  sink.Begin(t1, 70, Fn(0x3000), false);
  sink.End(t1, 75);
  sink.End(t1, 100);
  sink.Begin(t2, 0, Fn(0x3000), false);
  sink.End(t2, 50);
}

TEST_CASE("summary: calls, inclusive, self and max per function, per thread and overall") {
  std::string text =
      Summarize([](SliceSink& sink, testing::FakeNamer&) { WriteTwoThreads(sink); }, 0, true);
  // main: 100 inclusive, self 100 - 20 - 20 - 5 = 55. a: 20 + 20, self 10 + 20. b on thread 1:
  // 10 + 5, max 10; with thread 2's 50: 65 over all threads, max 50.
  CHECK(text == "pt-decode summary: 2 threads, 6 calls\n"
                "times in ns; total = inclusive (recursive calls counted once), self = "
                "exclusive, max = longest call\n\n"
                "all threads\n" + kHeader +
                Row(1, 100, 55, 100, "main [prog]") + Row(3, 65, 65, 50, "b [prog]") +
                Row(2, 40, 30, 20, "a [prog]") +
                "\nthread 1/1 \"prog\" \"main\"\n" + kHeader +
                Row(1, 100, 55, 100, "main [prog]") + Row(2, 40, 30, 20, "a [prog]") +
                Row(2, 15, 15, 10, "b [prog]") +
                "\nthread 1/2 \"\" \"\"\n" + kHeader + Row(1, 50, 50, 50, "b [prog]"));
}

TEST_CASE("summary: recursion counts every call but the inclusive time once") {
  // rec [0,100] > rec [10,90] > rec [20,80]; then rec [200,210] alone.
  std::string text = Summarize([](SliceSink& sink, testing::FakeNamer&) {
    ThreadKey t{1, 1};
    sink.Begin(t, 0, Fn(0x6000), false);
    sink.Begin(t, 10, Fn(0x6000), false);
    sink.Begin(t, 20, Fn(0x6000), false);
    sink.End(t, 80);
    sink.End(t, 90);
    sink.End(t, 100);
    sink.Begin(t, 200, Fn(0x6000), false);
    sink.End(t, 210);
  });
  // total: 100 + 10 (not 100 + 80 + 60 + 10); self: 20 + 20 + 60 + 10 = 110; max 100.
  CHECK(text == "all threads\n" + kHeader + Row(4, 110, 110, 100, "rec [prog]") +
                    "\nthread 1/1 \"\" \"\"\n" + kHeader + Row(4, 110, 110, 100, "rec [prog]"));
}

TEST_CASE("summary: slices open at the end close at the thread's last time") {
  std::string text = Summarize([](SliceSink& sink, testing::FakeNamer&) {
    ThreadKey t{1, 1};
    sink.Begin(t, 5, Fn(0x1000), false);
    sink.Begin(t, 10, Fn(0x2000), false);
    sink.Instant(t, 40, "[gap] overflow");
  });
  CHECK(text == "all threads\n" + kHeader + Row(1, 35, 5, 35, "main [prog]") +
                    Row(1, 30, 30, 30, "a [prog]") + "\nthread 1/1 \"\" \"\"\n" + kHeader +
                    Row(1, 35, 5, 35, "main [prog]") + Row(1, 30, 30, 30, "a [prog]"));
}

TEST_CASE("summary: ties sort by calls, then name; top N keeps the first rows") {
  auto write = [](SliceSink& sink, testing::FakeNamer&) {
    ThreadKey t{1, 1};
    // b and a: 10 ns each in one call; main 10 ns in two calls.
    sink.Begin(t, 0, Fn(0x3000), false);
    sink.End(t, 10);
    sink.Begin(t, 10, Fn(0x2000), false);
    sink.End(t, 20);
    sink.Begin(t, 20, Fn(0x1000), false);
    sink.End(t, 25);
    sink.Begin(t, 25, Fn(0x1000), false);
    sink.End(t, 30);
  };
  std::string rows = Row(2, 10, 10, 5, "main [prog]") + Row(1, 10, 10, 10, "a [prog]") +
                     Row(1, 10, 10, 10, "b [prog]");
  CHECK(Summarize(write) ==
        "all threads\n" + kHeader + rows + "\nthread 1/1 \"\" \"\"\n" + kHeader + rows);
  std::string top2 = Row(2, 10, 10, 5, "main [prog]") + Row(1, 10, 10, 10, "a [prog]");
  std::string text = Summarize(write, 2, true);
  CHECK(text.substr(0, text.find('\n')) == "pt-decode summary: 1 thread, 4 calls, top 2 functions per table");
  CHECK(text.substr(text.find("\n\n") + 2) ==
        "all threads\n" + kHeader + top2 + "\nthread 1/1 \"\" \"\"\n" + kHeader + top2);
}

using testing::Ev;

TEST_CASE("summary through the tracker: instruction totals from FlowEvent::insn_count") {
  std::string text = Summarize([](SliceSink& sink, testing::FakeNamer& namer) {
    ThreadKey t{1, 1};
    StackTracker tracker(t, namer, sink);
    // 3 instructions of main before the call at t=10, 4 in a before it calls b at t=20, 5 in b,
    // back in a (2 more) and a returns at t=40; 6 more in main until the end at t=50.
    tracker.OnEvent(Ev(K::kCall, 10, 0x1010, 0x2000, 3));
    tracker.OnEvent(Ev(K::kCall, 20, 0x2010, 0x3000, 4));
    tracker.OnEvent(Ev(K::kReturn, 30, 0x3020, 0x2015, 5));
    tracker.OnEvent(Ev(K::kReturn, 40, 0x2020, 0x1015, 2));
    tracker.OnEvent(Ev(K::kEnd, 50, 0x1030, 0, 6));
    tracker.Finish(50);
  });
  // main (inferred, from the first event's time 10; its instructions count from the start):
  // 40 ns, 3 + 4 + 5 + 2 + 6 = 20 insns; self 40 - 30 = 10 ns, 20 - 11 = 9 insns.
  // a: 30 ns, 4 + 5 + 2 = 11 insns, self 20 ns, 6 insns. b: 10 ns, 5 insns.
  std::string rows = Row(1, 40, 10, 40, 20, 9, "main [prog]") +
                     Row(1, 30, 20, 30, 11, 6, "a [prog]") + Row(1, 10, 10, 10, 5, 5, "b [prog]");
  CHECK(text == "all threads\n" + kInsnHeader + rows + "\nthread 1/1 \"\" \"\"\n" + kInsnHeader +
                    rows);
}

TEST_CASE("summary through the tracker: recursion past max_depth is counted, not folded") {
  std::string text = Summarize([](SliceSink& sink, testing::FakeNamer& namer) {
    ThreadKey t{1, 1};
    StackTrackerOptions options;
    options.max_depth = 10;
    StackTracker tracker(t, namer, sink, options);
    uint64_t time = 100;
    tracker.OnEvent(Ev(K::kCall, time++, 0x1010, 0x6000, 1));
    for (int i = 0; i < 599; ++i) tracker.OnEvent(Ev(K::kCall, time++, 0x6010, 0x6000, 1));
    for (int i = 0; i < 599; ++i) tracker.OnEvent(Ev(K::kReturn, time++, 0x6050, 0x6015, 1));
    tracker.OnEvent(Ev(K::kReturn, time++, 0x6050, 0x1015, 1));
    tracker.Finish(time);
  });
  // One event per ns and per instruction: calls at 100..699, returns at 700..1299, the end at
  // 1300. rec level k (0 = outermost) spans [100 + k, 1299 - k]: 1199 - 2k ns, self 2 ns (1 for
  // the innermost, k = 599); inclusive once = the outermost's 1199; self 599 * 2 + 1 = 1199.
  // main (inferred) spans [100, 1300] and counts instructions from 0: 1200 of each, self 1.
  std::string rows = Row(1, 1200, 1, 1200, 1200, 1, "main [prog]") +
                     Row(600, 1199, 1199, 1199, 1199, 1199, "rec [prog]");
  CHECK(text == "all threads\n" + kInsnHeader + rows + "\nthread 1/1 \"\" \"\"\n" + kInsnHeader +
                    rows);
}

// The JSON encoding (docs/DECODE_JSON.md): the first test's slices again, with capture totals.
std::string SummarizeJson(testing::FakeNamer& namer, const DecodeSummary* totals,
                          void (*write)(SliceSink&)) {
  std::string path = TempPath("out.summary.json");
  auto out = OutputFile::Open(path);
  REQUIRE(out);
  SummarySink sink(std::move(*out), namer, 0, SummarySink::Encoding::kJson);
  write(sink);
  if (totals != nullptr) sink.SetCaptureTotals(*totals);
  sink.Finish();
  CHECK(sink.OutputError() == "");
  std::string text = ReadFile(path);
  std::filesystem::remove(path);
  return text;
}

std::string JsonRow(const std::string& name, bool inlined, uint64_t calls, uint64_t total,
                    uint64_t self, uint64_t max) {
  return "{\"function\": \"" + name + "\", \"module\": \"prog\", \"inlined\": " +
         (inlined ? "true" : "false") + ", \"calls\": " + std::to_string(calls) +
         ", \"total_ns\": " + std::to_string(total) + ", \"self_ns\": " + std::to_string(self) +
         ", \"max_ns\": " + std::to_string(max) + ", \"insns\": 0, \"self_insns\": 0}";
}

TEST_CASE("summary JSON: the tables, the capture's totals, version 1, exact text") {
  testing::FakeNamer namer = Namer();
  DecodeSummary totals;
  totals.threads = 2;
  totals.instructions = 1234;
  totals.symbolized_instructions = 1000;
  totals.first_ns = 500;
  totals.last_ns = 600;
  totals.traced_ns = 150;
  totals.gap_ns = 40;
  totals.stats[Stat::kOverflowGaps] = 1;
  totals.stats[Stat::kMissingCodeGaps] = 2;
  totals.missing.push_back(MissingModule{"/lib/libgone.so", {0xab, 0x01}});
  std::string json = SummarizeJson(namer, &totals, WriteTwoThreads);
  // The same numbers as the text table of the first test.
  CHECK(json ==
        "{\"schema\": \"ptscope-summary\", \"version\": 1, \"times\": \"ns\",\n"
        " \"capture\": {\"threads\": 2, \"instructions\": 1234, \"symbolized_instructions\": "
        "1000, \"span_ns\": 100, \"traced_ns\": 150, \"gap_ns\": 40, \"calls\": 6, "
        "\"gaps\": {\"overflow\": 1, \"lost_data\": 0, "
        "\"decode_error\": 0, \"missing_code\": 2}, \"missing_modules\": [{\"path\": "
        "\"/lib/libgone.so\", \"build_id\": \"ab01\"}]},\n"
        " \"instructions_counted\": false,\n"
        " \"functions\": [\n"
        "  " + JsonRow("main", false, 1, 100, 55, 100) + ",\n"
        "  " + JsonRow("b", false, 3, 65, 65, 50) + ",\n"
        "  " + JsonRow("a", false, 2, 40, 30, 20) + "\n"
        " ],\n"
        " \"threads\": [\n"
        "  {\"pid\": 1, \"tid\": 1, \"process\": \"prog\", \"thread\": \"main\", \"functions\": [\n"
        "   " + JsonRow("main", false, 1, 100, 55, 100) + ",\n"
        "   " + JsonRow("a", false, 2, 40, 30, 20) + ",\n"
        "   " + JsonRow("b", false, 2, 15, 15, 10) + "\n"
        "  ]},\n"
        "  {\"pid\": 1, \"tid\": 2, \"process\": \"\", \"thread\": \"\", \"functions\": [\n"
        "   " + JsonRow("b", false, 1, 50, 50, 50) + "\n"
        "  ]}\n"
        " ]\n"
        "}\n");
}

TEST_CASE("summary JSON: nothing decoded is still a whole document") {
  testing::FakeNamer namer = Namer();
  CHECK(SummarizeJson(namer, nullptr, [](SliceSink&) {}) ==
        "{\"schema\": \"ptscope-summary\", \"version\": 1, \"times\": \"ns\",\n"
        " \"capture\": {\"threads\": 0, \"instructions\": 0, \"symbolized_instructions\": 0, "
        "\"span_ns\": 0, \"traced_ns\": 0, \"gap_ns\": 0, \"calls\": 0, \"gaps\": "
        "{\"overflow\": 0, \"lost_data\": 0, "
        "\"decode_error\": 0, \"missing_code\": 0}, \"missing_modules\": []},\n"
        " \"instructions_counted\": false,\n"
        " \"functions\": [],\n"
        " \"threads\": []\n"
        "}\n");
}

TEST_CASE("summary JSON: names are escaped, bytes that are not UTF-8 become U+FFFD") {
  testing::FakeNamer namer({{"op\"q\\ \t\x01 caf\xc3\xa9 \xff\xc3 \xe2\x82\xac", 0x1000},
                            {"inl", 0x2000}});
  namer.AddInlined(0x1010, {FrameName::Inlined{"inl", "", 0}});
  std::string json = SummarizeJson(namer, nullptr, [](SliceSink& sink) {
    ThreadKey t{7, 8};
    sink.Begin(t, 0, Fn(0x1000), false);
    sink.Begin(t, 1, FrameId{.address = 0x1010, .inline_index = 0,
                             .kind = FrameId::Kind::kInlined}, false);
    sink.End(t, 2);
    sink.End(t, 4);
  });
  CHECK(json.find("{\"function\": \"op\\\"q\\\\ \\t\\u0001 caf\xc3\xa9 \\ufffd\\ufffd "
                  "\xe2\x82\xac\", \"module\": \"prog\", \"inlined\": false, \"calls\": 1") !=
        std::string::npos);
  CHECK(json.find("{\"function\": \"inl\", \"module\": \"prog\", \"inlined\": true, \"calls\": "
                  "1, \"total_ns\": 1") != std::string::npos);
}

}  // namespace
}  // namespace ptscope::decode
