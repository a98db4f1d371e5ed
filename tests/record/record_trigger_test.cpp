// Trigger parsing, address resolution against this test binary's own ELF and maps, the
// breakpoint attr, the snapshot/stop policy, --filter resolution and option parsing helpers.
#include <doctest/doctest.h>
#include <linux/hw_breakpoint.h>
#include <unistd.h>

#include "proc_maps.h"
#include "pt_filter.h"
#include "kernel_source.h"
#include "target.h"
#include "trigger_policy.h"

extern "C" __attribute__((noinline, used)) int ptscope_trigger_test_target(int x) { return x + 5; }

namespace ptscope::record {
namespace {

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return std::string(buf, static_cast<size_t>(n > 0 ? n : 0));
}

}  // namespace

TEST_CASE("ParseTriggerSpec: symbols, addresses, prefixes, garbage") {
  auto sym = ParseTriggerSpec("main");
  REQUIRE(sym);
  CHECK(sym->kind == TriggerSpec::Kind::kSymbol);
  CHECK(sym->symbol == "main");
  auto addr = ParseTriggerSpec("0x401a2b");
  REQUIRE(addr);
  CHECK(addr->kind == TriggerSpec::Kind::kAddress);
  CHECK(addr->address == 0x401a2b);
  CHECK(ParseTriggerSpec("addr:0x10")->address == 0x10);
  CHECK(ParseTriggerSpec("symbol:0xdead")->symbol == "0xdead");
  auto bad = ParseTriggerSpec("0x12zz");
  REQUIRE(!bad);
  CHECK(bad.error().message == "--trigger '0x12zz' is not a valid hexadecimal address");
  CHECK(!ParseTriggerSpec(""));
  CHECK(!ParseTriggerSpec("addr:main"));
  auto scoped = ParseTriggerSpec("libc.so.6:write", "--start-at");
  REQUIRE(scoped);
  CHECK(scoped->module == "libc.so.6");
  CHECK(scoped->symbol == "write");
  CHECK(ParseTriggerSpec("symbol:a:b")->symbol == "a:b");
  CHECK(ParseTriggerSpec("symbol:a:b")->module.empty());
  CHECK(ParseTriggerSpec(":write", "--start-at").error().message ==
        "--start-at ':write': MODULE:SYMBOL needs both (libc.so.6:write)");
  CHECK(ParseTriggerSpec("0xzz", "--start-at").error().message ==
        "--start-at '0xzz' is not a valid hexadecimal address");
}

TEST_CASE("ResolveTrigger puts a symbol where the loader really mapped it") {
  auto maps = ReadProcMaps(0);
  REQUIRE(maps);
  auto resolved = ResolveTrigger(*ParseTriggerSpec("ptscope_trigger_test_target"), SelfExe(), *maps);
  REQUIRE(resolved);
  CHECK(resolved->address == reinterpret_cast<uint64_t>(&ptscope_trigger_test_target));
  CHECK(resolved->where == "ptscope_trigger_test_target in " + SelfExe());
  CHECK(ptscope_trigger_test_target(1) == 6);
  // A libc function, found through the other mappings (.dynsym of libc).
  auto in_libc = ResolveTrigger(*ParseTriggerSpec("getpid"), SelfExe(), *maps);
  REQUIRE(in_libc);
  CHECK(in_libc->where.find("libc.so.6") != std::string::npos);
  auto missing = ResolveTrigger(*ParseTriggerSpec("no_such_function_anywhere"), SelfExe(), *maps);
  REQUIRE(!missing);
  CHECK(missing.error().message ==
        "--trigger no_such_function_anywhere: not found in the target (" + SelfExe() +
            ": no defined symbol 'no_such_function_anywhere')");
  // MODULE:SYMBOL looks only there: the same getpid by its library's file name or full path;
  // the program's own function is not in libc.
  auto scoped = ResolveTrigger(*ParseTriggerSpec("libc.so.6:getpid"), SelfExe(), *maps);
  REQUIRE(scoped);
  CHECK(scoped->address == in_libc->address);
  const std::string libc_path = in_libc->where.substr(std::string("getpid in ").size());
  CHECK(ResolveTrigger(*ParseTriggerSpec(libc_path + ":getpid"), SelfExe(), *maps)->address ==
        in_libc->address);
  auto not_there = ResolveTrigger(*ParseTriggerSpec("libc.so.6:ptscope_trigger_test_target"),
                                  SelfExe(), *maps);
  REQUIRE(!not_there);
  // (Debian's libc has no .symtab: the message then also says it is stripped.)
  CHECK(not_there.error().message.rfind(
            "--trigger libc.so.6:ptscope_trigger_test_target: not found in the target (" +
                libc_path + ": no defined symbol 'ptscope_trigger_test_target'",
            0) == 0);
  auto unmapped = ResolveTrigger(*ParseTriggerSpec("libnope.so:getpid", "--start-at"), SelfExe(),
                                 *maps);
  REQUIRE(!unmapped);
  CHECK(unmapped.error().message ==
        "--start-at libnope.so:getpid: no module libnope.so is mapped in the target");
  auto stack_addr = ResolveTrigger(*ParseTriggerSpec("0x10"), SelfExe(), *maps);
  REQUIRE(!stack_addr);
  CHECK(stack_addr.error().message ==
        "--trigger 0x10 is not inside an executable mapping of the target");
}

TEST_CASE("BuildBreakpointAttr: an execute breakpoint, one sample per hit, user only") {
  perf_event_attr attr = BuildBreakpointAttr(0x401000);
  CHECK(attr.type == PERF_TYPE_BREAKPOINT);
  CHECK(attr.bp_type == HW_BREAKPOINT_X);
  CHECK(attr.bp_addr == 0x401000);
  CHECK(attr.bp_len == 8);
  CHECK(attr.sample_period == 1);
  CHECK(attr.sample_type == (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME));
  CHECK(unsigned(attr.exclude_kernel) == 1);
  CHECK(unsigned(attr.disabled) == 1);
}

TEST_CASE("TriggerPolicy in snapshot mode") {
  TriggerPolicy policy(/*snapshot_mode=*/true, /*multi_snapshot=*/false);
  TriggerAction usr2 = policy.On(Stimulus::kUsr2);
  CHECK(usr2.snapshot);
  CHECK(!usr2.stop);
  CHECK(usr2.reason == "usr2");
  TriggerAction hit = policy.On(Stimulus::kTriggerHit);
  CHECK(hit.snapshot);
  CHECK(hit.stop);
  CHECK(hit.reason == "trigger");
  TriggerAction sigint = policy.On(Stimulus::kInterrupt);
  CHECK((sigint.snapshot && sigint.stop && sigint.reason == "signal"));
  TriggerAction duration = policy.On(Stimulus::kDuration);
  CHECK((duration.snapshot && duration.stop && duration.reason == "duration"));
  CHECK(policy.snapshots_taken() == 4);
}

TEST_CASE("TriggerPolicy with --multi-snapshot keeps going and skips the exit snapshot") {
  TriggerPolicy policy(true, true);
  for (int i = 0; i < 3; ++i) {
    TriggerAction hit = policy.On(Stimulus::kTriggerHit);
    CHECK(hit.snapshot);
    CHECK(!hit.stop);
  }
  TriggerAction exit = policy.On(Stimulus::kTargetExit);
  CHECK(!exit.snapshot);
  CHECK(exit.stop);
  CHECK(exit.reason == "exit");
  TriggerPolicy never_hit(true, true);
  CHECK(never_hit.On(Stimulus::kTargetExit).snapshot);
}

TEST_CASE("TriggerPolicy in full mode never snapshots") {
  TriggerPolicy policy(false, false);
  TriggerAction usr2 = policy.On(Stimulus::kUsr2);
  CHECK((!usr2.snapshot && !usr2.stop));
  TriggerAction term = policy.On(Stimulus::kTerminate);
  CHECK((!term.snapshot && term.stop && term.reason == "signal"));
  CHECK(policy.snapshots_taken() == 0);
}

TEST_CASE("ResolvePtFilter turns FUNC @ FILE into the kernel's file-offset form") {
  std::string exe = SelfExe();
  auto filter = ResolvePtFilter("filter ptscope_trigger_test_target @ " + exe);
  REQUIRE(filter);
  // Oracle: runtime address minus the mapping start plus its file offset.
  auto maps = ReadProcMaps(0);
  REQUIRE(maps);
  auto runtime = reinterpret_cast<uint64_t>(&ptscope_trigger_test_target);
  const MapEntry* m = FindMapping(*maps, runtime);
  REQUIRE(m != nullptr);
  char expected_offset[32];
  std::snprintf(expected_offset, sizeof expected_offset, "filter 0x%llx/",
                static_cast<unsigned long long>(runtime - m->start + m->offset));
  CHECK(filter->rfind(expected_offset, 0) == 0);
  CHECK(filter->substr(filter->size() - exe.size() - 1) == "@" + exe);
  CHECK(*ResolvePtFilter("filter 0x1000/0x20@/bin/true, stop 0x2000/0x8@/bin/true") ==
        "filter 0x1000/0x20@/bin/true,stop 0x2000/0x8@/bin/true");
  auto bad = ResolvePtFilter("trace main @ /bin/true");
  REQUIRE(!bad);
  CHECK(bad.error().message == "--filter 'trace main @ /bin/true': action 'trace' is not filter "
                               "or stop (expected 'filter FUNC @ /path/to/file')");
  CHECK(!ResolvePtFilter("filter main @ relative/path"));
}

TEST_CASE("ParsePidList and ParseBufferSize") {
  CHECK(*ParsePidList("12,345") == std::vector<int>{12, 345});
  auto bad = ParsePidList("12,,3");
  REQUIRE(!bad);
  CHECK(bad.error().message == "-p '12,,3': '' is not a process id");
  CHECK(*ParseBufferSize("4M") == 4u << 20);
  CHECK(*ParseBufferSize("256K") == 256u << 10);
  CHECK(*ParseBufferSize("5000") == 8192);  // a power-of-two number of pages
  CHECK(*ParseBufferSize("3M") == 4u << 20);
  auto junk = ParseBufferSize("4X");
  REQUIRE(!junk);
  CHECK(junk.error().message == "--snapshot-size '4X' is not a size like 256K, 4M or 1G");
  CHECK(!ParseBufferSize("0"));
}

TEST_CASE("defect 10: --snapshot-size above what rb_alloc_aux can allocate is refused at once") {
  // The AUX page array must fit in one allocation of order MAX_PAGE_ORDER: 2 GiB of 4 KiB pages.
  CHECK(*ParseBufferSize("2G") == 2ull << 30);
  for (const char* text : {"3G", "4G", "16G"}) {
    auto big = ParseBufferSize(text);
    REQUIRE(!big);
    CHECK(big.error().message ==
          std::string("--snapshot-size '") + text +
              "' is above 2G, the largest AUX area the kernel allocates per event");
  }
}

TEST_CASE("defect 9: filters Intel PT cannot take are refused when the options are parsed") {
  const std::string exe = SelfExe();
  // pt_event_addr_filters_validate(): no "start" filters, no single-address (size-less) ones.
  auto start = ResolvePtFilter("start ptscope_trigger_test_target @ " + exe);
  REQUIRE(!start);
  CHECK(start.error().message ==
        "--filter 'start ptscope_trigger_test_target @ " + exe +
            "': Intel PT has no start filters (use 'filter FUNC @ FILE' to trace only FUNC)");
  auto stop = ResolvePtFilter("stop 0x2000 @ /bin/true");
  REQUIRE(!stop);
  CHECK(stop.error().message ==
        "--filter 'stop 0x2000 @ /bin/true': 'stop' needs a size (0xOFFSET/SIZE, or a symbol with "
        "a size): Intel PT filters ranges, not single addresses");
  // File filters on CPU-wide events: perf_event_parse_addr_filter() says EOPNOTSUPP.
  auto wide = ResolvePtFilter("filter 0x1000/0x10 @ /bin/true", FilterLimits{true, 2});
  REQUIRE(!wide);
  CHECK(wide.error().message ==
        "--filter with -a: the kernel takes address filters in files only for a program or -p "
        "PID, not for every CPU (they would mean different addresses in each process)");
  auto many = ResolvePtFilter("filter 0x1/1@/bin/true,filter 0x2/1@/bin/true,filter 0x3/1@/bin/true",
                              FilterLimits{false, 2});
  REQUIRE(!many);
  CHECK(many.error().message == "--filter: 3 ranges, but this CPU has 2 (caps/num_address_ranges)");
}

}  // namespace ptscope::record
