// Sideband pieces that work on any host: the dummy event attr, records synthesized from /proc
// (checked against this process's maps and readelf), perf time conversion, and a real dummy
// event opened on this process.
#include "perf_sideband.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elf_file.h"
#include "perf_event.h"
#include "record_test_util.h"

namespace ptscope::record {

TEST_CASE("BuildSidebandAttr: dummy event with mmap2+build_id, comm_exec, task, switches") {
  perf_event_attr attr = BuildSidebandAttr({});
  CHECK(attr.type == PERF_TYPE_SOFTWARE);
  CHECK(attr.config == PERF_COUNT_SW_DUMMY);
  CHECK(attr.sample_type == 0x10086);
  CHECK(unsigned(attr.sample_id_all) == 1);
  CHECK(unsigned(attr.mmap2) == 1);
  CHECK(unsigned(attr.build_id) == 1);
  CHECK(unsigned(attr.comm) == 1);
  CHECK(unsigned(attr.comm_exec) == 1);
  CHECK(unsigned(attr.task) == 1);
  CHECK(unsigned(attr.context_switch) == 1);
  CHECK(unsigned(attr.inherit) == 1);
  CHECK(unsigned(attr.exclude_kernel) == 1);
  CHECK(unsigned(attr.disabled) == 1);
}

TEST_CASE("PerfClock converts TSC like perf, without overflow") {
  PerfClock clock;
  clock.time_shift = 31;
  clock.time_mult = 1431655765;  // about 1/1.5 GHz in 2^-31 units
  clock.time_zero = 1000;
  uint64_t tsc = 0x123456789abcdefull;
  unsigned __int128 exact = (static_cast<unsigned __int128>(tsc) * clock.time_mult) >> 31;
  CHECK(clock.TscToPerfTime(tsc) == 1000 + static_cast<uint64_t>(exact));
  CHECK(clock.Metadata() == std::vector<std::pair<std::string, std::string>>{
                                {"time.shift", "31"}, {"time.mult", "1431655765"},
                                {"time.zero", "1000"}, {"time.cap_user_time_zero", "0"}});
}

TEST_CASE("defect 10: the time fields are read only under an even seqlock count "
          "(perf_event_update_userpage increments it around an update)") {
  perf_event_mmap_page page{};
  page.time_shift = 31;
  page.time_mult = 1u << 31;
  page.time_zero = 5;
  page.cap_user_time_zero = 1;
  page.lock = 4;  // even: no update in progress
  PerfClock clock = ReadPerfClock(page);
  CHECK(clock.time_mult == 1u << 31);
  CHECK(clock.time_zero == 5);
  // Odd: the kernel is half-way through an update (of which the reader sees a torn mix). The
  // count does not change while we read, yet the values must not be taken: unknown instead.
  page.lock = 5;
  page.time_mult = 0xdeadbeef;
  clock = ReadPerfClock(page);
  CHECK(clock.time_mult == 0);
  CHECK(clock.time_zero == 0);
}

TEST_CASE("SynthesizeProcess(self): COMM per thread and MMAP2 with readelf's build id") {
  SynthesisContext context;
  context.time = 77;
  context.cpu = 1;
  context.id = 9;
  BuildIdCache cache;
  std::vector<uint8_t> records;
  REQUIRE(SynthesizeProcess(getpid(), context, &cache, &records));
  std::string exe = test::SelfExePath();
  std::string expected_id = test::ReadelfBuildId(exe);
  auto code = reinterpret_cast<uint64_t>(&SynthesizeProcess);
  bool saw_comm = false, saw_exe = false, saw_vdso = false;
  perf::RecordIterator it(records, SidebandLayout());
  while (auto next = it.Next()) {
    REQUIRE(*next);
    const perf::Record& r = next->value();
    REQUIRE(r.sample_id);
    CHECK(r.sample_id->time == 77);
    CHECK(r.sample_id->cpu == 1);
    CHECK(r.sample_id->id == 9);
    if (const auto* comm = std::get_if<perf::CommRecord>(&r.body)) {
      saw_comm |= comm->tid == static_cast<uint32_t>(getpid());
      CHECK(!comm->exec);
    }
    if (const auto* m = std::get_if<perf::MmapRecord>(&r.body)) {
      CHECK(r.type == perf::kRecordMmap2);
      CHECK((m->prot & PROT_EXEC) != 0);
      if (m->filename == exe && code >= m->addr && code < m->addr + m->len) {
        saw_exe = true;
        CHECK(test::ToHexString(m->build_id) == expected_id);
        CHECK(r.misc == (perf::kMiscUser | perf::kMiscMmapBuildId));
      }
      saw_vdso |= m->filename == "[vdso]";
    }
  }
  CHECK(saw_comm);
  CHECK(saw_exe);
  CHECK(saw_vdso);
}

TEST_CASE("a real dummy sideband event on this process sees an mmap of an executable file") {
  SidebandAttrOptions options;
  options.inherit = false;
  auto event = PerfEvent::Open(SystemPerfKernel(), BuildSidebandAttr(options), 0, -1, "dummy for self");
  if (!event) {
    MESSAGE("perf_event_open is not allowed here: " << event.error().message);
    return;
  }
  REQUIRE(event->MapRing(8));
  REQUIRE(event->Enable());
  // Map /bin/true executable: the kernel reports it as MMAP2 with the file's build id.
  std::string path = "/bin/true";
  int fd = open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  REQUIRE(p != MAP_FAILED);
  REQUIRE(event->Disable());
  std::vector<uint8_t> records;
  DrainDataRing(event->data_ring(), &records);
  munmap(p, 4096);
  close(fd);
  std::string real = test::RunCommand("readlink -f /bin/true");
  real.pop_back();
  bool seen = false;
  perf::RecordIterator it(records, SidebandLayout());
  while (auto next = it.Next()) {
    REQUIRE(*next);
    if (const auto* m = std::get_if<perf::MmapRecord>(&next->value().body)) {
      if (m->addr != reinterpret_cast<uint64_t>(p)) continue;
      seen = true;
      CHECK(m->filename == real);
      CHECK(m->pid == static_cast<uint32_t>(getpid()));
      CHECK(test::ToHexString(m->build_id) == test::ReadelfBuildId(real));
    }
  }
  CHECK(seen);
}

}  // namespace ptscope::record
