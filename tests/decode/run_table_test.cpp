// RunTable (decode/src/flow/run_table.h): the QueryWalker's runs by (section, address) in 32-byte
// slots that hold the key as the run's length back from its end. Every field must come back as
// stored, through collisions, growth and runs that share an address in different sections.
#include <doctest/doctest.h>

#include <vector>

#include "flow/run_table.h"

namespace ptscope::decode {
namespace {

// A run from `ip` with fields derived from (ip, isid), all distinct between runs.
WalkerRun MakeRun(uint64_t ip, int isid) {
  WalkerRun run;
  run.ninsn = static_cast<uint16_t>(1 + (ip + static_cast<uint64_t>(isid)) % 700);
  run.end_ip = ip + run.ninsn * 3u;
  run.size = static_cast<uint8_t>(1 + ip % 15);
  run.iclass = (ip & 1) != 0 ? ptic_call : ptic_cond_jump;
  run.direct = (ip & 2) != 0;
  run.target = run.direct ? ip * 7 + static_cast<uint64_t>(isid) : 0;
  run.call_size = run.iclass == ptic_call ? run.size : 0;
  return run;
}

void CheckSame(const WalkerRun* found, uint64_t ip, int isid, const WalkerRun& stored) {
  REQUIRE(found != nullptr);
  CHECK(found->end_ip == stored.end_ip);
  CHECK(found->end_ip - found->length == ip);
  CHECK(found->target == stored.target);
  CHECK(found->isid == isid);
  CHECK(found->ninsn == stored.ninsn);
  CHECK(found->size == stored.size);
  CHECK(found->iclass == stored.iclass);
  CHECK(found->direct == stored.direct);
  CHECK(found->slow == stored.slow);
  CHECK(found->unsupported == stored.unsupported);
  CHECK(found->call_size == stored.call_size);
}

TEST_CASE("runs at one address in several sections, and many colliding runs, through growth") {
  RunTable table;
  // Addresses 64 bytes apart in three sections: the 64-slot table starts full of collisions
  // (home slots from the top bits of the hash) and grows several times.
  std::vector<std::pair<uint64_t, int>> keys;
  for (uint64_t i = 0; i < 3000; ++i) {
    keys.push_back({0x400000 + i * 64, 1 + static_cast<int>(i % 3)});
  }
  for (int isid = 1; isid <= 3; ++isid) keys.push_back({0x7f0000001000, isid});  // one address
  for (const auto& [ip, isid] : keys) {
    REQUIRE(table.Find(ip, isid) == nullptr);
    const WalkerRun& kept = table.Insert(ip, isid, MakeRun(ip, isid));
    CheckSame(&kept, ip, isid, MakeRun(ip, isid));
  }
  CHECK(table.size() == keys.size());
  for (const auto& [ip, isid] : keys) {
    CheckSame(table.Find(ip, isid), ip, isid, MakeRun(ip, isid));
    CHECK(table.Find(ip + 1, isid) == nullptr);  // an address inside the run is no key
    CHECK(table.Find(ip, isid + 3) == nullptr);  // nor the address in a section never stored
  }
}

TEST_CASE("one address in 40 sections: 40 runs, each found in its own section only") {
  RunTable table;  // 64 slots until the 33rd run: long probe chains through the same address
  for (int isid = 1; isid <= 40; ++isid) {
    REQUIRE(table.Find(0x401000, isid) == nullptr);
    table.Insert(0x401000, isid, MakeRun(0x401000, isid));
  }
  for (int isid = 1; isid <= 40; ++isid) {
    CheckSame(table.Find(0x401000, isid), 0x401000, isid, MakeRun(0x401000, isid));
  }
  CHECK(table.Find(0x401000, 41) == nullptr);
}

TEST_CASE("a slow run with no instruction, and a direct branch far away, keep their fields") {
  RunTable table;
  WalkerRun nothing;  // code that could not be read: no instruction, end_ip 0
  nothing.slow = true;
  nothing.unsupported = true;
  table.Insert(0xffffffffff600000, 5, nothing);
  const WalkerRun* found = table.Find(0xffffffffff600000, 5);
  REQUIRE(found != nullptr);
  CHECK(found->slow);
  CHECK(found->unsupported);
  CHECK(found->ninsn == 0);
  WalkerRun far = MakeRun(0x1000, 5);  // a 64-bit target, nowhere near the run
  far.direct = true;
  far.target = 0xffff800000001234;
  table.Insert(0x1000, 5, far);
  CheckSame(table.Find(0x1000, 5), 0x1000, 5, far);
  CHECK(table.Find(0xffffffffff600000, 5)->slow);  // still there after another insertion
}

}  // namespace
}  // namespace ptscope::decode
