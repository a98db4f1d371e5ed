// The lazy unit plan (decode/src/parallel/unit_planner.h) and the ordered pool that pulls it
// (decode/src/parallel/unit_pool.h): units come in consumption order (threads, then per-CPU units merged by
// time), --time-range drops exactly the units outside it, and the pool plans units one at a time,
// never more than its window ahead of the consumer, and consumes them in order for any --jobs.
#include <doctest/doctest.h>

#include <atomic>
#include <tuple>

#include "decode_core_pt_builder.h"
#include "parallel/unit_planner.h"
#include "parallel/unit_pool.h"

namespace ptscope::decode {
namespace {

// A piece in memory with one PSB+ per time (0: a TSC of 0, i.e. none), each followed by padding.
Piece PieceOfPsbs(const std::vector<uint64_t>& times, std::string loss_before = "") {
  testing::PtBuilder pt;
  for (uint64_t tsc : times) {
    pt.Psb(tsc, 0x401000);
    for (int i = 0; i < 40; ++i) pt.Simple(ppt_pad);
  }
  std::vector<uint8_t> bytes = pt.bytes();
  Piece piece;
  piece.size = bytes.size();
  piece.bytes = PieceBytes::Join({&bytes});
  piece.loss_before = std::move(loss_before);
  return piece;
}

// Pieces are move-only: no initializer lists of them.
Stream ThreadStream(uint32_t tid, Piece piece) {
  Stream stream;
  stream.key = ThreadKey{tid, tid};
  stream.pieces.push_back(std::move(piece));
  return stream;
}

Stream CpuStream(int32_t cpu, Piece first, Piece second = Piece{}) {
  Stream stream;
  stream.cpu = cpu;
  stream.pieces.push_back(std::move(first));
  if (second.size != 0) stream.pieces.push_back(std::move(second));
  return stream;
}

// (stream, piece, unit, start_ns, following_start_ns) of every planned unit.
using Planned = std::tuple<size_t, size_t, size_t, uint64_t, uint64_t>;

std::vector<Planned> Plan(std::vector<Stream>& streams, uint64_t from_ns, uint64_t to_ns) {
  DecoderSetup setup;  // no conversion: TSC values are nanoseconds
  pt_config config;
  pt_config_init(&config);
  UnitPlanner planner(streams, setup, config, 1, "/nonexistent/never-read.ptar", from_ns, to_ns);
  std::vector<Planned> planned;
  WorkUnit work;
  while (planner.Next(&work)) {
    CHECK(work.unreadable.empty());
    planned.emplace_back(work.stream, work.piece, work.unit, work.start_ns,
                         work.following_start_ns);
    // What the unit's decoder is told about the next unit of its piece.
    const Piece& piece = streams[work.stream].pieces[work.piece];
    CHECK(work.span.end <= piece.size);
    CHECK(work.per_cpu == (streams[work.stream].cpu >= 0));
    if (work.has_next) {
      CHECK(work.next_start.valid);
      CHECK(work.span.end < piece.size);
    } else {
      CHECK(work.span.end == piece.size);
    }
    CHECK(work.planned_bytes <= planner.total_bytes());
  }
  CHECK(!planner.Next(&work));  // the end stays the end
  return planned;
}

std::vector<Stream> MixedStreams() {
  std::vector<Stream> streams;
  streams.push_back(ThreadStream(10, PieceOfPsbs({100, 200, 300})));
  // cpu 0: a second piece after lost data whose first PSB is earlier than the last one before
  // the loss (its units keep the stream's time: 250).
  streams.push_back(CpuStream(0, PieceOfPsbs({50, 150, 250}), PieceOfPsbs({240, 400}, "lost")));
  streams.push_back(CpuStream(1, PieceOfPsbs({150, 160, 0, 500})));
  // A thread whose trace holds no PSB at all: listed after per-CPU streams, planned before them.
  Piece no_psb;
  std::vector<uint8_t> pads(300, 0x00);
  no_psb.size = pads.size();
  no_psb.bytes = PieceBytes::Join({&pads});
  streams.push_back(ThreadStream(11, std::move(no_psb)));
  return streams;
}

TEST_CASE("units come per thread first, then per CPU merged by time, ties in stream order") {
  std::vector<Stream> streams = MixedStreams();
  const uint64_t kNone = UINT64_MAX;
  std::vector<Planned> expected = {
      {0, 0, 0, 100, 200}, {0, 0, 1, 200, 300}, {0, 0, 2, 300, 50},
      {1, 0, 0, 50, 150},  {1, 0, 1, 150, 150},  // cpu 0 before cpu 1 at 150
      {2, 0, 0, 150, 160}, {2, 0, 1, 160, 160},
      {2, 0, 2, 160, 250},                       // no TSC: the stream's last time
      {1, 0, 2, 250, 250}, {1, 1, 0, 250, 400},  // 240 after 250 on the same CPU: 250
      {1, 1, 1, 400, 500}, {2, 0, 3, 500, kNone}};
  CHECK(Plan(streams, 0, UINT64_MAX) == expected);
  for (size_t s = 0; s < 3; ++s) {
    for (const Piece& piece : streams[s].pieces) CHECK(piece.has_psb);
  }
  CHECK(!streams[3].pieces[0].has_psb);
}

TEST_CASE("--time-range drops the units that start after it or end before it") {
  std::vector<Stream> streams = MixedStreams();
  // [155, 260]: a unit is dropped when it starts after 260 or its piece's next unit starts
  // before 155. Units without a TSC, and the last unit of a piece, are kept by the second rule.
  std::vector<Planned> expected = {
      {0, 0, 0, 100, 200}, {0, 0, 1, 200, 150},  // 300 starts after the window
      {1, 0, 1, 150, 150},                       // cpu 0's first unit ends at 150 < 155
      {2, 0, 0, 150, 160}, {2, 0, 1, 160, 160}, {2, 0, 2, 160, 250},
      {1, 0, 2, 250, 250}, {1, 1, 0, 250, UINT64_MAX}};
  CHECK(Plan(streams, 155, 260) == expected);
}

TEST_CASE("the pool plans units in turn, within its window, and consumes them in order") {
  for (unsigned jobs : {1u, 2u, 3u, 5u}) {
    for (size_t window : {size_t{1}, size_t{2}, size_t{7}}) {
      for (size_t units : {size_t{0}, size_t{1}, size_t{9}, size_t{200}}) {
        CAPTURE(jobs);
        CAPTURE(window);
        CAPTURE(units);
        std::atomic<bool> planning{false};
        std::atomic<size_t> consumed{0};
        size_t plan_calls = 0;
        bool plan_after_end = false, overlapping = false, beyond_window = false;
        std::atomic<bool> wrong_worker{false};
        auto plan = [&](size_t unit) {
          if (planning.exchange(true)) overlapping = true;
          if (unit != plan_calls) overlapping = true;
          if (plan_calls > units) plan_after_end = true;
          ++plan_calls;
          if (unit >= consumed.load() + window) beyond_window = true;
          planning = false;
          return unit < units;
        };
        auto decode = [&](size_t unit, unsigned worker, UnitEvents& out) {
          if (worker >= std::max(1u, jobs)) wrong_worker = true;
          CHECK(out.events.empty());  // buffers come back reset
          out.events.emplace_back();
          out.trailing_insns = unit * 7 + 1;
        };
        std::vector<size_t> order;
        auto consume = [&](size_t unit, UnitEvents& events) {
          CHECK(events.trailing_insns == unit * 7 + 1);
          CHECK(events.events.size() == 1);
          order.push_back(unit);
          consumed = unit + 1;
        };
        RunOrdered(jobs, window, plan, decode, consume);
        CHECK(plan_calls == units + 1);  // the last call said there are no more
        CHECK(!plan_after_end);
        CHECK(!overlapping);
        CHECK(!beyond_window);
        CHECK(!wrong_worker);
        REQUIRE(order.size() == units);
        for (size_t i = 0; i < units; ++i) CHECK(order[i] == i);
      }
    }
  }
}

}  // namespace
}  // namespace ptscope::decode
