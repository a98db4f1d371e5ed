// RunStore (listing/run_store.h): per-CPU listing runs come back exactly, by thread and time,
// from memory and from the scratch file, and a file changed under the decode is an error that
// names it, never a wrong listing.
#include "listing/run_store.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "scratch_dir.h"

namespace ptscope::decode {
namespace {

struct Replayed {
  uint32_t tid;
  std::vector<uint64_t> addresses;
  bool operator==(const Replayed&) const = default;
};

std::vector<Replayed> ReplayAll(RunStore& store, Status* status) {
  std::vector<Replayed> out;
  *status = store.Replay([&](uint32_t tid, std::span<const uint64_t> addresses) {
    out.push_back(Replayed{tid, std::vector<uint64_t>(addresses.begin(), addresses.end())});
  });
  return out;
}

// `count` addresses from `start`, mostly a few bytes on, now and then far away and back.
std::vector<uint64_t> Addresses(uint64_t start, size_t count) {
  std::vector<uint64_t> out;
  uint64_t at = start;
  for (size_t i = 0; i < count; ++i) {
    out.push_back(at);
    at = i % 97 == 96 ? at ^ 0x7f0000000000 : at + 1 + i % 13;
  }
  return out;
}

TEST_CASE("runs come back by thread, then time, equal times in the order added, exactly") {
  SpillDir dir;
  RunStore store;
  const std::vector<uint64_t> extreme{0, UINT64_MAX, 1, 0x8000000000000000, 0x7fffffffffffffff, 0};
  store.Add(7, 300, Addresses(0x401000, 5));
  store.Add(3, 500, extreme);
  store.Add(7, 100, Addresses(0x7f0000001000, 3));
  store.Add(3, 500, Addresses(0x500000, 4));  // the same time as the run before: after it
  store.Add(3, 200, {});
  Status status;
  const std::vector<Replayed> got = ReplayAll(store, &status);
  REQUIRE(status);
  const std::vector<Replayed> want{{3, {}},
                                   {3, extreme},
                                   {3, Addresses(0x500000, 4)},
                                   {7, Addresses(0x7f0000001000, 3)},
                                   {7, Addresses(0x401000, 5)}};
  CHECK(got == want);
  CHECK(store.file_bytes() == 0);  // a few bytes: all still in the buffer
}

TEST_CASE("runs past the buffer go to the scratch file and come back exactly") {
  SpillDir dir;
  RunStore store;
  std::vector<Replayed> want;
  // 39 runs of 40,000 addresses (about a byte each: 2 MB encoded with the next), one of 300,000
  // (more than one slice of the buffer), and runs that straddle each flush.
  for (uint32_t i = 0; i < 40; ++i) {
    const uint32_t tid = 100 + i % 3;
    want.push_back({tid, Addresses(0x400000 + i * 0x10000, i == 17 ? 300000 : 40000)});
    store.Add(tid, 1000 + i, want.back().addresses);
  }
  CHECK(store.file_bytes() > RunStore::kBufferBytes);
  CHECK(SpillFd(dir.path) >= 0);
  std::stable_sort(want.begin(), want.end(),
                   [](const Replayed& a, const Replayed& b) { return a.tid < b.tid; });
  Status status;
  const std::vector<Replayed> got = ReplayAll(store, &status);
  REQUIRE(status);
  CHECK(got == want);
}

TEST_CASE("without a usable scratch directory the runs stay in memory") {
  SpillDir dir;
  setenv("TMPDIR", (dir.path + "/missing").c_str(), 1);
  RunStore store;
  std::vector<Replayed> want;
  for (uint32_t i = 0; i < 12; ++i) {
    want.push_back({5, Addresses(0x10000 * i, 100000)});
    store.Add(5, i, want.back().addresses);
  }
  CHECK(store.file_bytes() == 0);
  Status status;
  CHECK(ReplayAll(store, &status) == want);
  CHECK(status);
}

TEST_CASE("a scratch file changed or cut under the decode is an error naming its directory") {
  SpillDir dir;
  RunStore store;
  const std::vector<uint64_t> run = Addresses(0x401000, 400000);  // past the buffer: in the file
  store.Add(1, 1, run);
  store.Add(1, 2, run);
  REQUIRE(store.file_bytes() > 0);
  const int fd = SpillFd(dir.path);
  REQUIRE(fd >= 0);
  Status status;
  SUBCASE("bytes changed: varints that run past the run's bytes") {
    const std::vector<uint8_t> continued(64, 0xff);
    REQUIRE(pwrite(fd, continued.data(), continued.size(), 100) == 64);
    ReplayAll(store, &status);
    REQUIRE(!status);
    CHECK(status.error().message ==
          "the instruction listing's temporary file in " + dir.path +
              " changed under the decode (a run at offset 0 does not decode)");
  }
  SUBCASE("bytes changed: the run ends before its bytes do") {
    const std::vector<uint8_t> zeros(8, 0);  // one byte an address where there were more
    REQUIRE(pwrite(fd, zeros.data(), zeros.size(), 0) == 8);
    const std::vector<uint8_t> ones(4096, 0x02);  // small steps: fewer bytes than written
    REQUIRE(pwrite(fd, ones.data(), ones.size(), 8) == 4096);
    ReplayAll(store, &status);
    REQUIRE(!status);
    CHECK(status.error().message.find("has bytes past its end") != std::string::npos);
  }
  SUBCASE("the file cut short") {
    REQUIRE(ftruncate(fd, 1000) == 0);
    ReplayAll(store, &status);
    REQUIRE(!status);
    CHECK(status.error().message ==
          "the instruction listing's temporary file in " + dir.path +
              " could not be read back at offset 0: Input/output error");
  }
}

// Runs of a few addresses on 5 threads at times that repeat (equal times within and across the
// index's chunks), added in an order that is not sorted; `want` is what Replay must give: a stable
// sort by thread and time of the order added.
struct ManyRuns {
  std::vector<std::pair<uint64_t, Replayed>> added;  // time, run
  std::vector<Replayed> want;
  explicit ManyRuns(size_t count) {
    uint64_t state = 12345;
    for (size_t i = 0; i < count; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const auto tid = static_cast<uint32_t>(1 + (state >> 33) % 5);
      const uint64_t time = (state >> 40) % 50;  // 5 threads x 50 times: many equal keys
      added.push_back({time, {tid, Addresses(0x400000 + i * 64, i % 7)}});
    }
    auto sorted = added;
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      if (a.second.tid != b.second.tid) return a.second.tid < b.second.tid;
      return a.first < b.first;
    });
    for (const auto& [time, run] : sorted) want.push_back(run);
  }
  void AddTo(RunStore& store) const {
    for (const auto& [time, run] : added) store.Add(run.tid, time, run.addresses);
  }
};

TEST_CASE("past index_runs the index goes to its own file in sorted chunks, merged back exactly") {
  SpillDir dir;
  for (const size_t index_runs : {size_t{1}, size_t{2}, size_t{7}, size_t{64}, size_t{5000}}) {
    CAPTURE(index_runs);
    const ManyRuns runs(1000);
    RunStore store(index_runs);
    runs.AddTo(store);
    // Whole chunks went to the file; the rest (fewer than a chunk) stayed in memory.
    CHECK(store.index_file_runs() == 1000 / index_runs * index_runs);
    CHECK(store.file_bytes() == 0);  // the addresses themselves: a few KB, in the buffer
    Status status;
    const std::vector<Replayed> got = ReplayAll(store, &status);
    REQUIRE(status);
    CHECK(got == runs.want);
  }
}

TEST_CASE("without a usable scratch directory the index stays in memory, in the same order") {
  SpillDir dir;
  setenv("TMPDIR", (dir.path + "/missing").c_str(), 1);
  const ManyRuns runs(300);
  RunStore store(8);
  runs.AddTo(store);
  CHECK(store.index_file_runs() == 0);
  Status status;
  CHECK(ReplayAll(store, &status) == runs.want);
  CHECK(status);
}

TEST_CASE("an index file changed under the decode is an error naming it, never a wrong listing") {
  SpillDir dir;
  const ManyRuns runs(100);
  RunStore store(10);
  runs.AddTo(store);
  REQUIRE(store.index_file_runs() == 100);
  REQUIRE(store.file_bytes() == 0);
  const int fd = SpillFd(dir.path);  // the only file: the addresses stayed in the buffer
  REQUIRE(fd >= 0);
  // Records are 40 bytes: time, offset, bytes, count (8 each), tid, zero (4 each).
  Status status;
  SUBCASE("a record's run made longer than any run added") {
    const uint64_t bytes = uint64_t{1} << 40;
    REQUIRE(pwrite(fd, &bytes, 8, 40 * 3 + 16) == 8);
    ReplayAll(store, &status);
    REQUIRE(!status);
    CHECK(status.error().message ==
          "the instruction listing's temporary file in " + dir.path +
              " changed under the decode (the run index record at offset 120 points outside the "
              "runs written)");
  }
  SUBCASE("a record's thread changed so that its chunk is out of order") {
    const uint32_t tid = 0;  // below every thread: before the chunk's first
    REQUIRE(pwrite(fd, &tid, 4, 40 * 5 + 32) == 4);
    ReplayAll(store, &status);
    REQUIRE(!status);
    CHECK(status.error().message ==
          "the instruction listing's temporary file in " + dir.path +
              " changed under the decode (the run index record at offset 200 is out of order)");
  }
  SUBCASE("the index cut short") {
    REQUIRE(ftruncate(fd, 40 * 50) == 0);
    ReplayAll(store, &status);
    REQUIRE(!status);
    CHECK(status.error().message ==
          "the instruction listing's temporary file in " + dir.path +
              " could not be read back at index offset 2000: Input/output error");
  }
}

}  // namespace
}  // namespace ptscope::decode
