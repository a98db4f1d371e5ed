// QueryWalker over JIT code (served by the image's read callback, not a section): decoded
// instructions are cached per version of the code (a jitdump LOAD, a MOVE's new copy, a reload
// at the same address), so a hot function is decoded once, and code that changed at an address
// is never served from the old version. Real JitCodeStore, ThreadImage and ThreadImageCode;
// PT written with libipt's encoder.
#include <doctest/doctest.h>

#include <sstream>

#include "decode_core_pt_builder.h"
#include "flow/code_images.h"
#include "flow/query_walker.h"
#include "jit_code_store.h"

namespace ptscope::decode {
namespace {

using testing::PtBuilder;

constexpr uint32_t kPid = 1;
// v1: nop; jmp *%rax. v2: nop; nop; nop; jmp *%rax.
const std::vector<uint8_t> kV1 = {0x90, 0xff, 0xe0};
const std::vector<uint8_t> kV2 = {0x90, 0x90, 0x90, 0xff, 0xe0};

symbols::JitCodeRecord Load(uint64_t at, uint64_t address, const std::vector<uint8_t>& code) {
  symbols::JitCodeRecord record;
  record.kind = symbols::JitCodeRecord::Kind::kLoad;
  record.timestamp = at;
  record.code_addr = address;
  record.code_size = code.size();
  record.name = "jitted";
  record.code = code;
  return record;
}

// LOAD v1 at 0x5000 (t=100), MOVE it to 0x6000 (t=200), LOAD v2 at 0x5000 (t=300).
symbols::JitCodeStore Store() {
  symbols::JitDump dump;
  dump.arch_timestamp = true;  // with an identity time map: timestamps are trace ns
  dump.records.push_back(Load(100, 0x5000, kV1));
  symbols::JitCodeRecord move;
  move.kind = symbols::JitCodeRecord::Kind::kMove;
  move.timestamp = 200;
  move.old_code_addr = 0x5000;
  move.code_addr = 0x6000;
  move.code_size = kV1.size();
  dump.records.push_back(move);
  dump.records.push_back(Load(300, 0x5000, kV2));
  symbols::JitCodeStore store;
  store.AddJitdump(kPid, dump, symbols::JitTimeMap{});
  return store;
}

TEST_CASE("JIT code versions: a LOAD, its MOVE and a reload at the same address differ") {
  symbols::JitCodeStore store = Store();
  const uint64_t loaded = store.CodeVersion(kPid, 0x5000, 150);
  const uint64_t moved = store.CodeVersion(kPid, 0x6000, 250);
  const uint64_t reloaded = store.CodeVersion(kPid, 0x5000, 350);
  CHECK(loaded != 0);
  CHECK(moved != 0);
  CHECK(reloaded != 0);
  CHECK(loaded != moved);
  CHECK(loaded != reloaded);
  CHECK(moved != reloaded);
  CHECK(store.CodeVersion(kPid, 0x5002, 150) == loaded);  // one version over the whole load
  CHECK(store.CodeVersion(kPid, 0x5003, 150) == reloaded);  // only the reload holds 0x5003
  CHECK(store.CodeVersion(kPid, 0x5005, 150) == 0);         // past every load: nothing to read
  CHECK(store.CodeVersion(kPid + 1, 0x5000, 150) == 0);   // another process
}

// Walks the trace block by block, setting the image's time before each block from `times`, and
// returns "ip ninsn end_ip" per block.
std::string Walk(const symbols::JitCodeStore& store, const std::vector<uint64_t>& times,
                 WalkerCache& cache) {
  PtBuilder pt;
  pt.Psb(1000, 0x5000);
  for (uint64_t target : {0x5000, 0x6000, 0x5000, 0x5000}) pt.Ip(ppt_tip, target);
  pt.Ip(ppt_tip_pgd, 0);
  const std::vector<uint8_t> trace = pt.bytes();

  symbols::AddressSpace space;
  symbols::ModuleResolver resolver({});
  CodeImages images(space, resolver);
  images.SetJitCode(&store);
  images.Prepare({kPid});
  ThreadImage image(images, kPid);
  bool changed = false;
  REQUIRE(image.At(0, &changed) != nullptr);
  ThreadImageCode code(image);

  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t*>(trace.data());
  config.end = config.begin + trace.size();
  QueryWalker walker(config, code, &cache);
  REQUIRE(walker.ok());
  int status = walker.SyncForward();
  REQUIRE(status >= 0);
  std::ostringstream out;
  for (uint64_t time : times) {
    while ((status & pts_event_pending) != 0) {
      pt_event event;
      status = walker.Event(&event);
      REQUIRE(status >= 0);
    }
    image.SetTime(time);
    pt_block block;
    status = walker.Next(&block);
    REQUIRE_MESSAGE(status >= 0, "status " << status << " at t=" << time);
    out << std::hex << "0x" << block.ip << " " << std::dec << block.ninsn << " 0x" << std::hex
        << block.end_ip << "\n";
  }
  return out.str();
}

TEST_CASE("QueryWalker: JIT code decoded once per version, never served stale") {
  // t=150 twice: v1 at 0x5000 (the second visit from the cache); t=250: the moved copy at
  // 0x6000; t=350: v2, loaded at 0x5000 where v1 was, with other bytes; t=350 again.
  const std::string expected =
      "0x5000 2 0x5001\n"
      "0x5000 2 0x5001\n"
      "0x6000 2 0x6001\n"
      "0x5000 4 0x5003\n"
      "0x5000 4 0x5003\n";
  const symbols::JitCodeStore store = Store();
  WalkerCache cache;
  CHECK(Walk(store, {150, 150, 250, 350, 350}, cache) == expected);
  // Each instruction of each version decoded once: v1's 2, the moved copy's 2, v2's 4.
  CHECK(cache.callback_insns.size() == 8);
  CHECK(cache.insns.size() == 0);
  CHECK(cache.runs.size() == 0);  // runs through callback code are not cached (only instructions)

  // The same cache in a second walk (another decode unit of the worker): still exact, nothing new.
  CHECK(Walk(store, {150, 150, 250, 350, 350}, cache) == expected);
  CHECK(cache.callback_insns.size() == 8);

  // The reload seen first, then the old version: neither is served the other's bytes.
  WalkerCache fresh;
  CHECK(Walk(store, {350, 350, 250, 150, 150}, fresh) ==
        "0x5000 4 0x5003\n"
        "0x5000 4 0x5003\n"
        "0x6000 2 0x6001\n"
        "0x5000 2 0x5001\n"
        "0x5000 2 0x5001\n");
}

}  // namespace
}  // namespace ptscope::decode
