#include "proc_maps.h"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "record_test_util.h"

namespace ptscope::record {

TEST_CASE("ParseProcMaps reads every field, vdso, deleted and paths with spaces") {
  const char* text =
      "55d0c0a00000-55d0c0a02000 r-xp 00001000 08:01 1234567                    /usr/bin/my prog\n"
      "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
      "7f1000000000-7f1000002000 r--s 0001f000 fd:02 42                         /tmp/x (deleted)\n"
      "7ffd1e5fe000-7ffd1e600000 r-xp 00000000 00:00 0                          [vdso]\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";
  auto maps = ParseProcMaps(text, "test");
  REQUIRE(maps);
  REQUIRE(maps->size() == 5);
  const MapEntry& prog = (*maps)[0];
  CHECK(prog.start == 0x55d0c0a00000);
  CHECK(prog.end == 0x55d0c0a02000);
  CHECK(prog.read);
  CHECK(!prog.write);
  CHECK(prog.exec);
  CHECK(!prog.shared);
  CHECK(prog.prot() == (PROT_READ | PROT_EXEC));
  CHECK(prog.offset == 0x1000);
  CHECK(prog.dev_major == 8);
  CHECK(prog.dev_minor == 1);
  CHECK(prog.inode == 1234567);
  CHECK(prog.path == "/usr/bin/my prog");
  CHECK(prog.is_file());
  CHECK(!prog.deleted);
  CHECK((*maps)[1].path == "");
  CHECK(!(*maps)[1].is_file());
  CHECK((*maps)[1].prot() == (PROT_READ | PROT_WRITE));
  const MapEntry& gone = (*maps)[2];
  CHECK(gone.path == "/tmp/x");
  CHECK(gone.deleted);
  CHECK(gone.shared);
  CHECK(gone.dev_major == 0xfd);
  CHECK(gone.offset == 0x1f000);
  CHECK((*maps)[3].is_vdso());
  CHECK(FindVdso(*maps) == &(*maps)[3]);
  CHECK((*maps)[4].start == 0xffffffffff600000);
  CHECK((*maps)[4].prot() == PROT_EXEC);
  CHECK(FindMapping(*maps, 0x55d0c0a01fff) == &prog);
  CHECK(FindMapping(*maps, 0x55d0c0a02000) == nullptr);
}

TEST_CASE("ParseProcMaps names the line and field of garbage") {
  auto bad = ParseProcMaps("00400000-00401000 r-xp 0 08:01 12 /bin/a\nzzzz\n", "/proc/9/maps");
  REQUIRE(!bad);
  CHECK(bad.error().code == Errc::kCorrupt);
  CHECK(bad.error().message == "/proc/9/maps:2: cannot parse the address range field of 'zzzz'");
  auto no_inode = ParseProcMaps("00400000-00401000 r-xp 0 08:01 /bin/a\n", "m");
  REQUIRE(!no_inode);
  CHECK(no_inode.error().message.find("inode") != std::string::npos);
  auto reversed = ParseProcMaps("00402000-00401000 r-xp 0 08:01 1 /bin/a\n", "m");
  CHECK(!reversed);
}

static int KnownFunctionForMaps() { return 7; }

TEST_CASE("ReadProcMaps of this process finds our code, the stack and the vdso") {
  auto maps = ReadProcMaps(0);
  REQUIRE(maps);
  std::string exe = test::SelfExePath();
  auto code = reinterpret_cast<uint64_t>(&KnownFunctionForMaps);
  const MapEntry* mine = FindMapping(*maps, code);
  REQUIRE(mine != nullptr);
  CHECK(mine->path == exe);
  CHECK(mine->exec);
  int local = 0;
  const MapEntry* stack = FindMapping(*maps, reinterpret_cast<uint64_t>(&local));
  REQUIRE(stack != nullptr);
  CHECK(stack->path == "[stack]");
  CHECK(stack->write);
  const MapEntry* vdso = FindVdso(*maps);
  REQUIRE(vdso != nullptr);
  CHECK(vdso->exec);
}

TEST_CASE("ListThreads lists this process's tid and fails cleanly for a missing pid") {
  auto tids = ListThreads(getpid());
  REQUIRE(tids);
  CHECK(std::find(tids->begin(), tids->end(), getpid()) != tids->end());
  auto none = ListThreads(0x3fffffff);
  REQUIRE(!none);
  CHECK(none.error().code == Errc::kNotFound);
  CHECK(none.error().message.rfind("/proc/1073741823/task: ", 0) == 0);
}

}  // namespace ptscope::record

namespace ptscope::record {

TEST_CASE("OnlineCpus matches getconf, ListProcesses includes us") {
  auto cpus = OnlineCpus();
  REQUIRE(cpus);
  CHECK(cpus->size() == std::stoul(test::RunCommand("getconf _NPROCESSORS_ONLN")));
  auto pids = ListProcesses();
  CHECK(std::find(pids.begin(), pids.end(), getpid()) != pids.end());
  CHECK(std::is_sorted(pids.begin(), pids.end()));
}

}  // namespace ptscope::record
