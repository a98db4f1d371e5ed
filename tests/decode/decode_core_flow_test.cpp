// FlowDecoder on PT written with libipt's encoder over a small hand-assembled code image:
// exact UnitEvents (kind, addresses, instruction counts, interpolated times, the unit's end).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <span>
#include <sstream>
#include <string>

#include "flow/code_images.h"
#include "decode_core_pt_builder.h"
#include "decode_differential.h"
#include "capture/decoder_setup.h"
#include "flow/flow_decoder.h"

namespace ptscope::decode {
namespace {

using testing::CodeFile;
using testing::PtBuilder;
using Kind = FlowEvent::Kind;

constexpr uint64_t kBase = 0x1000;

// 0x1000 nop; call 0x1010; jmp 0x1020 ... 0x1010 nop; jz 0x1014; nop; 0x1014 ret
// 0x1020 nop; syscall; 0x1023 nop; 0x1024 ret; 0x1025 jmp *%rax; 0x1027 nop; jmp 0x1025
std::vector<uint8_t> TestCode() {
  std::vector<uint8_t> code(0x40, 0x90);
  const std::vector<uint8_t> call = {0xe8, 0x0a, 0x00, 0x00, 0x00};
  const std::vector<uint8_t> jmp = {0xe9, 0x15, 0x00, 0x00, 0x00};
  std::copy(call.begin(), call.end(), code.begin() + 0x01);
  std::copy(jmp.begin(), jmp.end(), code.begin() + 0x06);
  code[0x11] = 0x74;  // jz +1
  code[0x12] = 0x01;
  code[0x14] = 0xc3;
  code[0x21] = 0x0f;  // syscall
  code[0x22] = 0x05;
  code[0x24] = 0xc3;
  code[0x25] = 0xff;  // jmp *%rax
  code[0x26] = 0xe0;
  code[0x28] = 0xeb;  // jmp 0x1025
  code[0x29] = 0xfb;
  return code;
}

// The unit's events, then its end as the kEnd a thread's last unit ends with (join/thread_feed.h):
// from the last block's end, after the instructions retired since the last event, when the last
// instruction ran.
std::string Describe(const UnitEvents& unit) {
  static const char* kNames[] = {"call", "return", "jump", "syscall", "disable", "enable",
                                 "async", "gap", "trigger", "end", "inline"};
  std::ostringstream out;
  uint64_t last_ns = 0;
  for (const FlowEvent& e : unit.events) {
    out << kNames[static_cast<int>(e.kind)] << std::hex << " 0x" << e.from << "->0x" << e.to;
    if (e.kind == Kind::kCall) out << " ret=0x" << e.return_ip();
    if (e.kind == Kind::kGap) out << " cause=" << GapCauseName(e.gap_cause);
    if (e.kind == Kind::kInlineChange) out << " depth=" << std::dec << e.inline_depth;
    out << std::dec << " t=" << e.time_ns << " n=" << e.insn_count << "\n";
    last_ns = e.time_ns;
  }
  out << std::hex << "end 0x" << unit.last_end_ip << "->0x0" << std::dec
      << " t=" << std::max(last_ns, unit.end_ns) << " n=" << unit.trailing_insns << "\n";
  return out.str();
}

// Decodes `trace` over `code` mapped at kBase for pid 1 with libipt's block decoder, or with
// QueryWalker when `walker` is given; *refused says whether the walker refused the trace. With
// `gap_texts`, each gap's text and the unit's missing-code addresses follow the events. With
// `later_mapping_ns`, the same code is also mapped at kLaterBase from that time on (a second
// image epoch, nothing else changes). With `own_packets`, the walker reads the trace with
// PacketQuery (pt-decode's first tier) instead of libipt's query decoder; *refused then also
// says whether PacketQuery refused it.
constexpr uint64_t kLaterBase = 0x3000;
std::string DecodeWith(const std::vector<uint8_t>& trace, const std::vector<uint8_t>& code,
                       WalkerCache* walker, bool* refused, bool gap_texts = false,
                       uint64_t later_mapping_ns = 0, bool own_packets = false,
                       CodeFacts* code_facts = nullptr, bool skz84 = false) {
  CodeFile file(code);
  symbols::AddressSpace space;
  uint32_t module = space.InternModule(file.path(), {});
  space.Map(1, 0, kBase, code.size(), 0, module);
  if (later_mapping_ns != 0) space.Map(1, later_mapping_ns, kLaterBase, code.size(), 0, module);
  symbols::ModuleResolver resolver({});
  CodeImages images(space, resolver);
  images.Prepare({1});
  DecoderSetup setup;
  setup.nom_freq = 1;  // with CBR 1: one CYC cycle = one TSC tick
  setup.errata.skz84 = skz84 ? 1 : 0;
  BlockFacts facts;
  UnitEvents unit;
  FlowDecoder decoder(setup, images, 1, facts, unit);
  if (walker != nullptr) decoder.UseWalker(walker, own_packets);
  if (code_facts != nullptr) decoder.SetCodeFacts(code_facts);
  decoder.DecodeSegment(trace.data(), trace.size());
  *refused = decoder.walker_refused() || decoder.packets_refused();
  std::string described = Describe(unit);
  if (gap_texts) {
    for (const FlowEvent& e : unit.events) {
      if (e.kind == Kind::kGap) described += "gap text: " + e.detail.str() + "\n";
    }
    std::ostringstream ips;
    ips << std::hex;
    for (uint64_t ip : unit.stats.missing_code_ips) ips << "missing code at 0x" << ip << "\n";
    described += ips.str();
  }
  return described;
}

// Ends a trace the way most cases here do: decoding resumes at a PSB (TSC 2000) at 0x1020, runs
// nop; syscall, and tracing stops there. Its events: "syscall 0x1021->0x0 t=2002 n=2" and
// "end 0x1021->0x0 t=2002 n=0".
void ResumeToSyscall(PtBuilder& pt) {
  pt.Psb(2000, 0x1020);
  pt.Cyc(2);
  pt.Ip(ppt_tip_pgd, 0);
}

// A whole trace of one branch: a PSB (TSC 1000) at `ip`, `cycles` CYC, one taken bit, `cycles`
// CYC, and tracing stops (TIP.PGD without an ip) at the syscall the code reaches next.
std::vector<uint8_t> TakenBitToSyscall(uint64_t ip, uint64_t cycles) {
  PtBuilder pt;
  pt.Psb(1000, ip);
  pt.Cyc(cycles);
  pt.Tnt({true});
  pt.Cyc(cycles);
  pt.Ip(ppt_tip_pgd, 0);
  return pt.bytes();
}

// Decodes `trace` over TestCode() (or `code`) and returns the events as text. Every trace is also
// decoded with QueryWalker, which must give exactly the same events (all of these traces are
// 64-bit code and events it models: it must not refuse them), and with QueryWalker on
// PacketQuery, which must too where PacketQuery models the trace's packets (`own_packets_refuse`:
// it does not, e.g. a bad TMA without SKZ84; it must then refuse, never decode differently).
// `skz84`: the CPU has erratum SKZ84 (libipt skips a TMA with reserved bits set).
std::string Decode(const std::vector<uint8_t>& trace, std::vector<uint8_t> code = TestCode(),
                   bool gap_texts = false, uint64_t later_mapping_ns = 0,
                   bool own_packets_refuse = false, bool skz84 = false) {
  bool refused = false;
  const std::string libipt = DecodeWith(trace, code, nullptr, &refused, gap_texts,
                                        later_mapping_ns, false, nullptr, skz84);
  WalkerCache cache;
  const std::string walker = DecodeWith(trace, code, &cache, &refused, gap_texts,
                                        later_mapping_ns, false, nullptr, skz84);
  CHECK_FALSE(refused);
  CHECK(walker == libipt);
  WalkerCache own_cache;
  const std::string own = DecodeWith(trace, code, &own_cache, &refused, gap_texts,
                                     later_mapping_ns, /*own_packets=*/true, nullptr, skz84);
  CHECK(refused == own_packets_refuse);
  if (!refused) CHECK(own == libipt);
  return libipt;
}

// Erratum SKZ84 (VMX TSC scaling or offsetting corrupts packets; the Skylake, Ice Lake and
// Sapphire Rapids servers): libipt 2.0.5 skips a TMA with reserved bits set and the byte after it.
// PacketQuery does the same instead of refusing every trace of such a CPU; without the erratum
// the packet is an error, which PacketQuery leaves to libipt (it refuses).
TEST_CASE("SKZ84: a TMA with a reserved bit set is skipped with the byte after it") {
  PtBuilder pt;
  pt.Psb(1000, 0x1000);
  // A TMA whose reserved byte is 1, then a CYC of 1 cycle that libipt skips with it (decoded,
  // it would move every time below by one tick).
  pt.Raw({0x02, 0x73, 0x00, 0x00, 0x01, 0x00, 0x00, 0x0b});
  pt.Cyc(4);
  pt.Tnt({true, true});
  pt.Cyc(4);
  pt.Ip(ppt_tip_pgd, 0);
  CHECK(Decode(pt.bytes(), TestCode(), false, 0, /*own_packets_refuse=*/false, /*skz84=*/true) ==
        "call 0x1001->0x1010 ret=0x1006 t=1002 n=2\n"
        "return 0x1014->0x1006 t=1005 n=3\n"
        "jump 0x1006->0x1020 t=1006 n=1\n"
        "syscall 0x1021->0x0 t=1008 n=2\n"
        "end 0x1021->0x0 t=1008 n=0\n");
  bool refused = false;
  WalkerCache cache;
  DecodeWith(pt.bytes(), TestCode(), &cache, &refused, false, 0, /*own_packets=*/true);
  CHECK(refused);
}

TEST_CASE("call, compressed return, jump, syscall, re-enable: exact events and CYC times") {
  PtBuilder pt;
  pt.Psb(1000, 0x1000);
  pt.Cyc(4);             // jz retires at 1004
  pt.Tnt({true, true});  // jz taken, ret compressed
  pt.Cyc(4);             // syscall retires at 1008
  pt.Ip(ppt_tip_pgd, 0);
  pt.Tsc(2000);
  pt.Mode64();
  pt.Ip(ppt_tip_pge, 0x1023);
  pt.Cyc(2);             // ret retires at 2002
  pt.Ip(ppt_tip_pgd, 0);
  CHECK(Decode(pt.bytes()) ==
        "call 0x1001->0x1010 ret=0x1006 t=1002 n=2\n"
        "return 0x1014->0x1006 t=1005 n=3\n"
        "jump 0x1006->0x1020 t=1006 n=1\n"
        "syscall 0x1021->0x0 t=1008 n=2\n"
        "enable 0x0->0x1023 t=2000 n=0\n"
        "return 0x1024->0x0 t=2002 n=2\n"
        "disable 0x1024->0x0 t=2002 n=0\n"
        "end 0x1024->0x0 t=2002 n=0\n");
}

TEST_CASE("an indirect jump loop (block cache, ptic_error path) gives exact jumps and times") {
  PtBuilder pt;
  pt.Psb(1000, 0x1025);
  pt.Cyc(1);
  pt.Ip(ppt_tip, 0x1027);  // jmp *%rax retires at 1001
  pt.Cyc(3);
  pt.Ip(ppt_tip, 0x1027);  // second time at 1004
  pt.Cyc(3);
  pt.Ip(ppt_tip_pgd, 0);   // third time at 1007: tracing stops
  CHECK(Decode(pt.bytes()) ==
        "jump 0x1025->0x1027 t=1001 n=1\n"
        "jump 0x1028->0x1025 t=1003 n=2\n"
        "jump 0x1025->0x1027 t=1004 n=1\n"
        "jump 0x1028->0x1025 t=1006 n=2\n"
        "jump 0x1025->0x0 t=1007 n=1\n"
        "disable 0x1025->0x0 t=1007 n=0\n"
        "end 0x1025->0x0 t=1007 n=0\n");
}

TEST_CASE("overflow is a gap that resumes at the FUP address") {
  PtBuilder pt;
  pt.Psb(1000, 0x1000);
  pt.Cyc(3);
  pt.Simple(ppt_ovf);  // libipt binds it before the first instruction that needed no trace
  pt.Ip(ppt_fup, 0x1020);
  pt.Tsc(1005);  // libipt distrusts CYC after an overflow until the next TSC
  pt.Ip(ppt_tip_pgd, 0);
  CHECK(Decode(pt.bytes()) ==
        "gap 0x0->0x1020 cause=overflow t=1003 n=0\n"
        "syscall 0x1021->0x0 t=1005 n=2\n"
        "end 0x1021->0x0 t=1005 n=0\n");
}

TEST_CASE("an overflow that resolved with tracing off is a gap until tracing is enabled again") {
  PtBuilder pt;
  pt.Psb(1000, 0x1000);
  pt.Cyc(3);
  pt.Simple(ppt_ovf);  // no FUP follows: tracing was off when the overflow resolved
  pt.Tsc(1004);
  pt.Ip(ppt_tip_pge, 0x1020);
  pt.Tsc(1005);
  pt.Ip(ppt_tip_pgd, 0);
  CHECK(Decode(pt.bytes()) ==
        "gap 0x0->0x0 cause=overflow t=1003 n=0\n"
        "enable 0x0->0x1020 t=1004 n=0\n"
        "syscall 0x1021->0x0 t=1005 n=2\n"
        "end 0x1021->0x0 t=1005 n=0\n");
}

TEST_CASE("an overflow at the end of the trace, or before a FUP cut off there, ends it with a gap") {
  PtBuilder pt;
  pt.Psb(1000, 0x1000);
  pt.Cyc(3);
  pt.Simple(ppt_ovf);
  const std::vector<uint8_t> bare = pt.bytes();
  // Nothing after the OVF: it stands alone (pt_qry_decode_ovf's end-of-trace case).
  CHECK(Decode(bare) ==
        "gap 0x0->0x0 cause=overflow t=1003 n=0\n"
        "end 0x0->0x0 t=1003 n=0\n");
  pt.Ip(ppt_fup, 0x1020);
  std::vector<uint8_t> cut = pt.bytes();
  cut.pop_back();  // the FUP's last byte
  // A FUP cut off by the end is the end too, not an overflow bound to an ip.
  CHECK(Decode(cut) ==
        "gap 0x0->0x0 cause=overflow t=1003 n=0\n"
        "end 0x0->0x0 t=1003 n=0\n");
}

TEST_CASE("an overflow followed by a TNT is libipt's error, which PacketQuery leaves to libipt") {
  PtBuilder pt;
  pt.Psb(1000, 0x1000);
  pt.Cyc(3);
  pt.Simple(ppt_ovf);
  pt.Tnt({true});  // tracing cannot be on without a FUP first (-pte_bad_context)
  pt.Ip(ppt_tip_pgd, 0);
  CHECK(Decode(pt.bytes(), TestCode(), false, 0, /*own_packets_refuse=*/true) ==
        "gap 0x0->0x0 cause=decode error t=1000 n=0\n"
        "end 0x0->0x0 t=1000 n=0\n");
}

TEST_CASE("a branch to an address without code is a missing-code gap, then decoding resumes") {
  PtBuilder pt;
  pt.Psb(1000, 0x1025);
  pt.Cyc(1);
  pt.Ip(ppt_tip, 0x9000);  // no code mapped there
  ResumeToSyscall(pt);
  CHECK(Decode(pt.bytes()) ==
        "jump 0x1025->0x9000 t=1001 n=1\n"
        "gap 0x0->0x0 cause=missing code t=1001 n=0\n"
        "syscall 0x1021->0x0 t=2002 n=2\n"
        "end 0x1021->0x0 t=2002 n=0\n");
}

// Issue 24's decode fuzz target (found at stop 36): tracing enabled at 0xffffffffffffffff, then
// disabled with its ip suppressed. There is no code there: libipt decodes the instruction first
// (pt_blk_proceed_to_insn) and reports missing code. The walker stood for "no ip" with that very
// address, found itself already there, took the disable, and failed on the TNT after it with
// 2^47 - 1 instructions counted.
TEST_CASE("enabled at the last address, disabled without an ip: a missing-code gap, not a walk") {
  PtBuilder pt;
  pt.Psb(1000, 0);
  pt.Cyc(1);
  pt.Ip(ppt_tip_pge, ~uint64_t{0});
  pt.Cyc(1);
  pt.Ip(ppt_tip_pgd, 0);
  pt.Tnt({true});
  ResumeToSyscall(pt);
  CHECK(Decode(pt.bytes(), TestCode(), /*gap_texts=*/true) ==
        "enable 0x0->0xffffffffffffffff t=1001 n=0\n"
        "gap 0x0->0x0 cause=missing code t=1001 n=0\n"
        "syscall 0x1021->0x0 t=2002 n=2\n"
        "end 0x1021->0x0 t=2002 n=0\n"
        "gap text: no code bytes for 0xffffffffffffffff (module not found or not mapped)\n"
        "missing code at 0xffffffffffffffff\n");
}

// The same address reached by a direct jump (0x1030: jmp rel32 that wraps to 0xff..ff) before a
// disable without an ip: libipt ends the block at the jump (it never "reaches" a missing ip) and
// fails at 0xff..ff in the next one.
TEST_CASE("a direct jump to the last address, then a disable without an ip: missing code") {
  std::vector<uint8_t> code = TestCode();
  const std::vector<uint8_t> jmp = {0xe9, 0xca, 0xef, 0xff, 0xff};  // 0x1035 - 0x1036
  std::copy(jmp.begin(), jmp.end(), code.begin() + 0x30);
  PtBuilder pt;
  pt.Psb(1000, 0x1030);
  pt.Cyc(1);
  pt.Ip(ppt_tip_pgd, 0);
  pt.Tnt({true});
  ResumeToSyscall(pt);
  CHECK(Decode(pt.bytes(), code, /*gap_texts=*/true) ==
        "jump 0x1030->0xffffffffffffffff t=1000 n=1\n"
        "gap 0x0->0x0 cause=missing code t=1000 n=0\n"
        "syscall 0x1021->0x0 t=2002 n=2\n"
        "end 0x1021->0x0 t=2002 n=0\n"
        "gap text: no code bytes for 0xffffffffffffffff (module not found or not mapped)\n"
        "missing code at 0xffffffffffffffff\n");
}

// Issue 24's decode fuzz target (stop 37): a TIP into the middle of libc's code, at bytes
// c5 48 85 db 7e 4b 41. libipt decodes them as one 7-byte VEX-encoded instruction and, as every
// VEX or EVEX one, not a branch (pt_instruction_decode); Zydis as a conditional branch (Knights
// Corner's jknzd). The walker took a TNT bit for it, and the next Jcc found none.
// 0x1030: those 7 bytes; 0x1037: jz 0x103b; 0x1039: nop; nop; 0x103b: syscall.
TEST_CASE("a VEX-encoded instruction Zydis calls a branch takes no TNT bit, as in libipt") {
  std::vector<uint8_t> code = TestCode();
  const std::vector<uint8_t> bytes = {0xc5, 0x48, 0x85, 0xdb, 0x7e, 0x4b, 0x41,  // VEX
                                      0x74, 0x02,                                // jz +2
                                      0x90, 0x90, 0x0f, 0x05};                   // syscall
  std::copy(bytes.begin(), bytes.end(), code.begin() + 0x30);
  const std::vector<uint8_t> trace = TakenBitToSyscall(0x1030, 1);
  CHECK(Decode(trace, code) ==
        "syscall 0x103b->0x0 t=1002 n=3\n"
        "end 0x103b->0x0 t=1002 n=0\n");
}

TEST_CASE("after an error, decoding resumes at the next PSB without repeating decoded trace") {
  PtBuilder pt;
  pt.Psb(1000, 0x1025);
  pt.Cyc(1);
  pt.Ip(ppt_tip, 0x1027);  // 1001
  pt.Psb(1001, 0x1025);    // passed while decoding normally
  for (int i = 0; i < 100; ++i) pt.Simple(ppt_pad);
  pt.Cyc(3);
  pt.Ip(ppt_tip, 0x9000);  // 1004, no code there
  pt.Psb(3000, 0x1020);
  pt.Cyc(2);
  pt.Ip(ppt_tip_pgd, 0);
  CHECK(Decode(pt.bytes()) ==
        "jump 0x1025->0x1027 t=1001 n=1\n"
        "jump 0x1028->0x1025 t=1003 n=2\n"
        "jump 0x1025->0x9000 t=1004 n=1\n"
        "gap 0x0->0x0 cause=missing code t=1004 n=0\n"
        "syscall 0x1021->0x0 t=3002 n=2\n"
        "end 0x1021->0x0 t=3002 n=0\n");
}

// Issue 24 (decode fuzz target): straight-line code that runs off the end of its mapping. libipt's
// block decoder ends the block at the section's end and fails the next block at the first address
// past it (which the gap names); QueryWalker failed with the instructions still in its block, and
// the gap named no address.
TEST_CASE("code that runs off the end of its mapping: the gap names the first address past it") {
  PtBuilder pt;
  pt.Psb(1000, 0x1030);  // 0x1030..0x103f: 16 nops, the last bytes of the mapping
  pt.Cyc(1);
  // A branch bit no instruction reaches: the walk past the mapping's end is not on the way to an
  // event (the next PSB's would be pending without it, and libipt walks to an event's ip
  // instruction by instruction: the next test).
  pt.Tnt({true});
  ResumeToSyscall(pt);
  CHECK(Decode(pt.bytes(), TestCode(), /*gap_texts=*/true) ==
        "gap 0x0->0x0 cause=missing code t=1000 n=16\n"
        "syscall 0x1021->0x0 t=2002 n=2\n"
        "end 0x1021->0x0 t=2002 n=0\n"
        "gap text: no code bytes for 0x1040 (module not found or not mapped)\n"
        "missing code at 0x1040\n");
}

// The same run, walked to an event's address beyond the mapping (an interrupt at 0x1050): libipt
// steps instruction by instruction to an event's ip and fails with the instructions in the block,
// so here the gap names no address, with either decoder.
TEST_CASE("walking to an event's ip past the mapping's end: the gap names no address") {
  PtBuilder pt;
  pt.Psb(1000, 0x1030);
  pt.Cyc(1);
  pt.Ip(ppt_fup, 0x1050);
  pt.Ip(ppt_tip, 0x1020);
  ResumeToSyscall(pt);
  CHECK(Decode(pt.bytes(), TestCode(), /*gap_texts=*/true) ==
        "gap 0x0->0x0 cause=missing code t=1000 n=16\n"
        "syscall 0x1021->0x0 t=2002 n=2\n"
        "end 0x1021->0x0 t=2002 n=0\n"
        "gap text: no code bytes for 0x0 (module not found or not mapped)\n");
}

TEST_CASE("a trace that ends inside a packet-free loop (jmp .) ends with a gap, not a hang") {
  std::vector<uint8_t> code = TestCode();
  code[0x30] = 0xeb;  // 0x1030: jmp 0x1030
  code[0x31] = 0xfe;
  PtBuilder pt;
  pt.Psb(1000, 0x1030);
  pt.Tnt({true});  // a packet that no instruction in the loop will ever consume
  std::string events = Decode(pt.bytes(), code);
  CHECK(events.find("gap 0x0->0x0 cause=decode error") != std::string::npos);
  CHECK(events.substr(events.size() - 4) == "n=0\n");
  // The loop is given up after 2^20 instructions without trace, checked every 2^12: the events
  // (one jump per turn of the loop) count its instructions, no fewer and not many more.
  uint64_t looped = 0;
  for (size_t at = events.find(" n="); at != std::string::npos; at = events.find(" n=", at + 1)) {
    looped += std::strtoull(events.c_str() + at + 3, nullptr, 10);
  }
  CHECK(looped >= (uint64_t{1} << 20));
  CHECK(looped <= (uint64_t{1} << 20) + 2 * (uint64_t{1} << 12));
}

// The fuzz campaign's spin (issue 24): tracing disabled without an ip is walked to the next
// instruction that needs trace; in a loop of direct jumps there is none, and the walker went
// round forever (libipt's block decoder did not). Both must give up after the same bound, with
// the same events.
TEST_CASE("a disable without an ip inside a packet-free loop ends with a gap, not a spin") {
  std::vector<uint8_t> code = TestCode();
  code[0x30] = 0xeb;  // 0x1030: jmp 0x1032
  code[0x31] = 0x00;
  code[0x32] = 0xeb;  // 0x1032: jmp 0x1030
  code[0x33] = 0xfc;
  PtBuilder pt;
  pt.Psb(1000, 0x1030);
  pt.Ip(ppt_tip_pgd, 0);  // disabled, ip suppressed
  std::string events = Decode(pt.bytes(), code);
  CHECK(events.find("gap 0x0->0x0 cause=decode error") != std::string::npos);
  uint64_t looped = 0;
  for (size_t at = events.find(" n="); at != std::string::npos; at = events.find(" n=", at + 1)) {
    looped += std::strtoull(events.c_str() + at + 3, nullptr, 10);
  }
  CHECK(looped <= (uint64_t{1} << 20) + 2 * (uint64_t{1} << 12));
}

// Issue 24 (decode fuzz target, TNT mutants that send libc's lock down its lock-elision path):
// xbegin and xend take no branch bit. Zydis files both under conditional branches, and
// QueryWalker took a TNT bit for each, where libipt's instruction decoder makes them plain
// instructions. 0x1000: xbegin 0x1020 (its fallback, reached only by an abort); 0x1006: xend;
// 23 nops; 0x1020: syscall.
TEST_CASE("xbegin and xend are not conditional branches: they take no TNT bit") {
  std::vector<uint8_t> code(0x40, 0x90);
  const std::vector<uint8_t> xbegin_xend = {0xc7, 0xf8, 0x1a, 0x00, 0x00, 0x00, 0x0f, 0x01, 0xd5};
  std::copy(xbegin_xend.begin(), xbegin_xend.end(), code.begin());
  code[0x20] = 0x0f;  // syscall
  code[0x21] = 0x05;
  PtBuilder pt;
  pt.Psb(1000, 0x1000);
  pt.Cyc(2);
  pt.Ip(ppt_tip_pgd, 0);
  CHECK(Decode(pt.bytes(), code) ==
        "syscall 0x1020->0x0 t=1002 n=26\n"
        "end 0x1020->0x0 t=1002 n=0\n");
}

// TestCode() and, past it, 0x1040: four nops; 0x1044: call 0x1010; 0x1049: jmp 0x1020; nops up
// to 0x107f (so no run here ends at the mapping's end).
std::vector<uint8_t> RunToIpCode() {
  std::vector<uint8_t> code = TestCode();
  code.resize(0x80, 0x90);
  const std::vector<uint8_t> call_jmp = {0xe8, 0xc7, 0xff, 0xff, 0xff,   // call 0x1010
                                         0xe9, 0xd2, 0xff, 0xff, 0xff};  // jmp 0x1020
  std::copy(call_jmp.begin(), call_jmp.end(), code.begin() + 0x44);
  return code;
}

std::string ToHex(uint64_t value) {
  std::ostringstream out;
  out << std::hex << value;
  return out.str();
}

// QueryWalker takes a run of up to kMaxRunInsns - 1 instructions in one step and refuses a
// longer one (pt_block::ninsn is 16 bits; libipt then decodes the unit). (On the way to an
// event's ip, runs are walked instruction by instruction instead, whatever their length.)
TEST_CASE("a run of kMaxRunInsns instructions is refused by the walker; a shorter one is not") {
  // `nops` nops, then jz +0 (taken or not, the next instruction) and a syscall.
  auto code_with_nops = [](size_t nops) {
    std::vector<uint8_t> code(nops + 0x10, 0x90);
    code[nops] = 0x74;
    code[nops + 1] = 0x00;
    code[nops + 2] = 0x0f;
    code[nops + 3] = 0x05;
    return code;
  };
  const std::vector<uint8_t> trace = TakenBitToSyscall(0x1000, 2);
  auto expected = [](size_t nops) {
    const std::string syscall = ToHex(0x1000 + nops + 2);
    return "syscall 0x" + syscall + "->0x0 t=1004 n=" + std::to_string(nops + 2) + "\nend 0x" +
           syscall + "->0x0 t=1004 n=0\n";
  };
  const size_t longest = QueryWalker::kMaxRunInsns - 1;  // nops and the jz: one run, walked
  CHECK(Decode(trace, code_with_nops(longest - 1)) == expected(longest - 1));
  bool refused = false;
  WalkerCache cache;
  const std::vector<uint8_t> code = code_with_nops(longest);
  DecodeWith(trace, code, &cache, &refused);
  CHECK(refused);
  CHECK(DecodeWith(trace, code, nullptr, &refused) == expected(longest));
}

// The walk to an event's ip from a block's start (QueryWalker::ProceedToIp): a run that does not
// hold the ip is taken in one step (ProceedRunToIp), one that does instruction by instruction.
// Decode() checks every case against libipt's block decoder.
TEST_CASE("a disable at a direct call's target (an untraced callee): the run is walked to it") {
  PtBuilder pt;
  pt.Psb(1000, 0x1040);
  pt.Cyc(5);                    // the call retires at 1005
  pt.Ip(ppt_tip_pgd, 0x1010);  // tracing stops as the call enters 0x1010
  CHECK(Decode(pt.bytes(), RunToIpCode()) ==
        "call 0x1044->0x1010 ret=0x1049 t=1005 n=5\n"
        "disable 0x1044->0x1010 t=1005 n=0\n"
        "end 0x1044->0x0 t=1005 n=0\n");
}

TEST_CASE("a disable at an ip the first run does not reach: the walk goes on in the next block") {
  PtBuilder pt;
  pt.Psb(1000, 0x1040);
  pt.Cyc(7);                    // the call at 1005, then nop and jz at 0x1010
  pt.Ip(ppt_tip_pgd, 0x1023);  // not on the way: the disable binds at the jz, which needs trace
  CHECK(Decode(pt.bytes(), RunToIpCode()) ==
        "call 0x1044->0x1010 ret=0x1049 t=1005 n=5\n"
        "disable 0x1011->0x1023 t=1007 n=2\n"
        "end 0x1011->0x0 t=1007 n=0\n");
}

TEST_CASE("an interrupt inside a run, and at its last instruction: walked instruction by "
          "instruction") {
  for (const uint64_t from : {uint64_t{0x1042}, uint64_t{0x1044}}) {
    PtBuilder pt;
    pt.Psb(1000, 0x1040);
    pt.Cyc(4);
    pt.Ip(ppt_fup, from);
    pt.Ip(ppt_tip, 0x1020);  // to the nop before the syscall
    pt.Cyc(2);
    pt.Ip(ppt_tip_pgd, 0);
    CAPTURE(from);
    const uint64_t before = from - 0x1040;  // the nops before it (as many as its offset)
    CHECK(Decode(pt.bytes(), RunToIpCode()) ==
          "async 0x" + ToHex(from) + "->0x1020 t=1004 n=" + std::to_string(before) + "\n" +
          "syscall 0x1021->0x0 t=1006 n=2\n"
          "end 0x1021->0x0 t=1006 n=0\n");
  }
}

TEST_CASE("an interrupt at an ip before the run (not among its addresses): the run is taken") {
  PtBuilder pt;
  pt.Psb(1000, 0x1040);
  pt.Cyc(7);
  pt.Ip(ppt_fup, 0x1011);  // after the call to 0x1010: its nop, then the interrupt at the jz
  pt.Ip(ppt_tip, 0x1020);
  pt.Cyc(2);
  pt.Ip(ppt_tip_pgd, 0);
  CHECK(Decode(pt.bytes(), RunToIpCode()) ==
        "call 0x1044->0x1010 ret=0x1049 t=1005 n=5\n"
        "async 0x1011->0x1020 t=1007 n=1\n"
        "syscall 0x1021->0x0 t=1009 n=2\n"
        "end 0x1021->0x0 t=1009 n=0\n");
}

TEST_CASE("bytes that are not PT give one decode-error gap, never a crash") {
  std::vector<uint8_t> garbage(64, 0xd9);
  CHECK(Decode(garbage) == "gap 0x0->0x0 cause=decode error t=0 n=0\nend 0x0->0x0 t=0 n=0\n");
}

// CodeFacts with `depth` inlined frames everywhere and no function starts.
struct UniformDepth : CodeFacts {
  explicit UniformDepth(uint32_t depth) : depth(depth) {}
  uint64_t FunctionStart(uint32_t, uint64_t, uint64_t) override { return 0; }
  uint32_t InlineDepth(uint32_t, uint64_t, uint64_t) override { return depth; }
  uint32_t depth;
};

// A unit cannot know the inlined depth before it (the unit before may be decoded at the same
// time): one that continues another states the depth of its first block, whatever it is, and the
// stack tracker takes a statement of the depth it has as a no-op (join/unit_join.h). A first unit
// knows the depth before it, 0, and states only a change.
TEST_CASE("a continuing unit states its first block's inlined depth; a first unit only a change") {
  std::vector<uint8_t> code = TestCode();
  CodeFile file(code);
  symbols::AddressSpace space;
  space.Map(1, 0, kBase, code.size(), 0, space.InternModule(file.path(), {}));
  symbols::ModuleResolver resolver({});
  CodeImages images(space, resolver);
  images.Prepare({1});
  DecoderSetup setup;
  setup.nom_freq = 1;
  PtBuilder pt;  // nop; call 0x1010 (nop; jz taken; ret); jmp 0x1020 (nop; syscall)
  pt.Psb(1000, 0x1000);
  pt.Cyc(4);
  pt.Tnt({true, true});
  pt.Cyc(4);
  pt.Ip(ppt_tip_pgd, 0);
  auto decode = [&](uint32_t depth, bool continuation) {
    UniformDepth facts_of_code(depth);
    BlockFacts facts;
    UnitEvents unit;
    FlowDecoder decoder(setup, images, 1, facts, unit);
    decoder.SetCodeFacts(&facts_of_code);
    if (continuation) decoder.SetContinuation();
    decoder.DecodeSegment(pt.bytes().data(), pt.bytes().size());
    return Describe(unit);
  };
  const std::string depth0 =
      "call 0x1001->0x1010 ret=0x1006 t=1002 n=2\n"
      "return 0x1014->0x1006 t=1005 n=3\n"
      "jump 0x1006->0x1020 t=1006 n=1\n"
      "syscall 0x1021->0x0 t=1008 n=2\n"
      "end 0x1021->0x0 t=1008 n=0\n";
  CHECK(decode(0, false) == depth0);
  CHECK(decode(0, true) == "inline 0x1000->0x1000 depth=0 t=1000 n=0\n" + depth0);
  // At depth 1 every block after a transfer states it (the tracker closes inlined slices at
  // calls and returns); the first block does in a first unit too, since it changes from 0.
  const std::string depth1 =
      "inline 0x1000->0x1000 depth=1 t=1000 n=0\n"
      "call 0x1001->0x1010 ret=0x1006 t=1002 n=2\n"
      "inline 0x1010->0x1010 depth=1 t=1002 n=0\n"
      "return 0x1014->0x1006 t=1005 n=3\n"
      "inline 0x1006->0x1006 depth=1 t=1005 n=0\n"
      "jump 0x1006->0x1020 t=1006 n=1\n"
      "inline 0x1020->0x1020 depth=1 t=1006 n=0\n"
      "syscall 0x1021->0x0 t=1008 n=2\n"
      "end 0x1021->0x0 t=1008 n=0\n";
  CHECK(decode(1, false) == depth1);
  CHECK(decode(1, true) == depth1);
}

// Two functions, F1 [0x1000, 0x1020) and F2 [0x1030, 0x1040), each a uniform stretch of inlined
// depth as code without inlining has: depth 0 for [0x1000, 0x1003), then depth 2 for
// [0x1003, 0x1040) (one stretch over both functions, so only the function test tells F2 apart).
// 0x1000 nop; 0x1001 jz 0x1000; 0x1003 jz 0x1030
// 0x1030 nop; 0x1031 jz 0x1030; 0x1033 jz 0x1000; 0x1035 syscall
struct TwoFunctions : CodeFacts {
  uint64_t FunctionStart(uint32_t pid, uint64_t address, uint64_t time_ns) override {
    return FunctionRange(pid, address, time_ns).first;
  }
  std::pair<uint64_t, uint64_t> FunctionRange(uint32_t, uint64_t address, uint64_t) override {
    if (address >= 0x1000 && address < 0x1020) return {0x1000, 0x1020};
    if (address >= 0x1030 && address < 0x1040) return {0x1030, 0x1040};
    return {0, 0};
  }
  uint32_t InlineDepth(uint32_t pid, uint64_t address, uint64_t time_ns) override {
    return InlineStretch(pid, address, time_ns).uniform_depth;
  }
  InlineDepthStretch InlineStretch(uint32_t, uint64_t address, uint64_t) override {
    InlineDepthStretch stretch;
    if (address >= 0x1000 && address < 0x1003) {
      stretch.begin = 0x1000;
      stretch.end = 0x1003;
    } else if (address >= 0x1003 && address < 0x1040) {
      stretch.begin = 0x1003;
      stretch.end = 0x1040;
      stretch.uniform_depth = 2;
    } else {
      return stretch;
    }
    // One step: a uniform span, as SymbolsFrameNamer::InlineStretch gives for such code.
    auto span = std::make_shared<symbols::InlineDepthSpan>();
    span->begin = stretch.begin;
    span->end = stretch.end;
    span->steps.push_back({stretch.begin, stretch.uniform_depth});
    stretch.uniform = true;
    stretch.span = std::move(span);
    return stretch;
  }
  static std::vector<uint8_t> Code() {
    std::vector<uint8_t> code(0x40, 0x90);
    code[0x01] = 0x74;  // jz 0x1000
    code[0x02] = 0xfd;
    code[0x03] = 0x74;  // jz 0x1030
    code[0x04] = 0x2b;
    code[0x31] = 0x74;  // jz 0x1030
    code[0x32] = 0xfd;
    code[0x33] = 0x74;  // jz 0x1000
    code[0x34] = 0xcb;
    code[0x35] = 0x0f;  // syscall
    code[0x36] = 0x05;
    return code;
  }
};

// FlowDecoder::TakeQuietBlocks: after a conditional branch, the walker steps through the blocks
// that make no event (a cached bit after a quiet tick, a run decoded before, the same function,
// no inlined depth to state) without handing them over. A TNT packet's bits from its third on
// are taken after a quiet tick. The walker decodes the trace twice with one cache, as a worker's
// units share it, so that the second time every run is known: bits 5 and 6 (fifth and sixth of
// their packet) end the blocks that start at 0x1003, which states depth 2, and at 0x1030, a jump
// into F2; stepped through, they would make neither. (The same in the second round through both
// functions, bits 15 and 16.) Every way must give libipt's block decoder's events, with every
// instruction counted.
TEST_CASE("blocks stepped through after a conditional branch: the counts, jumps and depths exact") {
  PtBuilder pt;
  pt.Psb(1000, 0x1000);
  pt.Cyc(2);
  // F1's loop 4 times, jz 0x1030 taken, F2's loop 4 times, jz 0x1000 taken; the same again, but
  // the last jz not taken: on to the syscall.
  pt.Tnt({true, true, true, false, true, true});  // bits 1-6
  pt.Tnt({true, true, false, true, true, true});  // bits 7-12
  pt.Tnt({true, false, true, true, true, true});  // bits 13-18
  pt.Tnt({false, false});                         // bits 19-20
  pt.Cyc(2);
  pt.Ip(ppt_tip_pgd, 0);  // at the syscall
  const std::vector<uint8_t> code = TwoFunctions::Code();
  std::string outputs[3];
  for (int way = 0; way < 3; ++way) {  // libipt's blocks, the walker on libipt's packets, on ours
    WalkerCache cache;
    for (int pass = way == 0 ? 1 : 0; pass < 2; ++pass) {
      TwoFunctions facts_of_code;
      bool refused = false;
      outputs[way] = DecodeWith(pt.bytes(), code, way == 0 ? nullptr : &cache, &refused, false,
                                0, /*own_packets=*/way == 2, &facts_of_code);
      CHECK_FALSE(refused);
    }
  }
  CHECK(outputs[1] == outputs[0]);
  CHECK(outputs[2] == outputs[0]);
  CHECK(outputs[0] ==
        "inline 0x1003->0x1003 depth=2 t=1002 n=8\n"
        "jump 0x1003->0x1030 t=1002 n=1\n"
        "inline 0x1030->0x1030 depth=2 t=1002 n=0\n"
        "jump 0x1033->0x1000 t=1002 n=9\n"
        "inline 0x1000->0x1000 depth=0 t=1002 n=0\n"
        "inline 0x1003->0x1003 depth=2 t=1003 n=8\n"
        "jump 0x1003->0x1030 t=1003 n=1\n"
        "inline 0x1030->0x1030 depth=2 t=1003 n=0\n"
        "syscall 0x1035->0x0 t=1004 n=10\n"
        "end 0x1035->0x0 t=1004 n=0\n");
}

// InlineStatements over BlockFacts: code moves between functions (a caller and its callees). A
// block from the per-block table makes its own stretch current again, so that the blocks after
// it in that function are Quiet (no look-up, and TakeQuietBlocks may step through them) and no
// question goes to CodeFacts again. Before, the stretch stayed with the function last asked
// about.
TEST_CASE("a block of a function seen before brings its stretch back: the blocks after it are quiet") {
  symbols::AddressSpace space;
  symbols::ModuleResolver resolver({});
  CodeImages images(space, resolver);
  ThreadImage image(images, 1);
  struct Counting : TwoFunctions {
    InlineDepthStretch InlineStretch(uint32_t pid, uint64_t address, uint64_t time_ns) override {
      ++questions;
      return TwoFunctions::InlineStretch(pid, address, time_ns);
    }
    int questions = 0;
  } code;
  BlockFacts facts;
  InlineStatements statements(facts);
  statements.SetCodeFacts(&code);
  statements.RefreshFast(1);
  auto block = [](uint64_t ip, uint64_t end_ip, uint16_t ninsn) {
    pt_block b{};
    b.ip = ip;
    b.end_ip = end_ip;
    b.ninsn = ninsn;
    return b;
  };
  const pt_block in_f1 = block(0x1000, 0x1001, 2), in_f2 = block(0x1030, 0x1031, 2);
  std::string stated;
  auto state = [&](const pt_block& b) {
    statements.StateBlock(b, 0, image, 0, [&](uint64_t, uint64_t ip, uint32_t depth) {
      stated += std::to_string(ip - 0x1000) + "@" + std::to_string(depth) + " ";
    });
  };
  state(in_f1);  // asks about [0x1000, 0x1003): depth 0, nothing to state
  CHECK_FALSE(statements.Quiet(in_f2));
  state(in_f2);  // asks about [0x1003, 0x1040): depth 2
  CHECK(statements.Quiet(in_f2));
  CHECK_FALSE(statements.Quiet(in_f1));
  state(in_f1);  // from the per-block table: back to depth 0, and its stretch is current
  CHECK(stated == "48@2 0@0 ");
  CHECK(code.questions == 2);
  CHECK(statements.Quiet(in_f1));  // was false: the stretch had stayed with F2
  CHECK_FALSE(statements.Quiet(in_f2));
  state(in_f2);
  CHECK(code.questions == 2);
  CHECK(statements.Quiet(in_f2));
  CHECK(stated == "48@2 0@0 48@2 ");
  CHECK(facts.stretches.size() == 2);  // one per stretch asked about
  // A block that starts in F1's stretch and ends past it: asked about again, kept once.
  state(block(0x1001, 0x1003, 2));
  CHECK(code.questions == 3);
  CHECK(facts.stretches.size() == 2);
  // Code no stretch covers: the answer is kept apart, and no block of the table names it.
  state(block(0x2000, 0x2001, 2));
  CHECK(facts.stretches.size() == 2);
  CHECK(facts.current == BlockFacts::kUncovered);
}

// Issue 24 (decode fuzz target, sideband mutants of the input above whose mappings start a few ns
// later): the same run off the mapping's end, after an image epoch change. QueryWalker::CodeChanged
// forgot only the end of the section it had looked up last, so for addresses above its start the
// walker took the stale section as current without a look-up: every run went the slow way, and
// ProceedNoEventSlow saw the block as outside any section and failed with its instructions in
// the block (no address named) where libipt's pt_blk_proceed_no_event found the section in the
// new image and ended the block at its end.
TEST_CASE("code that runs off its mapping's end after an image epoch change: the gap names it") {
  PtBuilder pt;
  pt.Psb(1000, 0x1025);  // jmp *%rax: the walker looks up the section at 0x1000
  pt.Cyc(6);             // t=1006: a mapping made at t=1005 starts a new epoch
  pt.Ip(ppt_tip, 0x1030);
  pt.Tnt({true});  // as above: nothing reaches it, no event is pending at the mapping's end
  ResumeToSyscall(pt);
  CHECK(Decode(pt.bytes(), TestCode(), /*gap_texts=*/true, /*later_mapping_ns=*/1005) ==
        "jump 0x1025->0x1030 t=1006 n=1\n"
        "gap 0x0->0x0 cause=missing code t=1102 n=16\n"
        "syscall 0x1021->0x0 t=2002 n=2\n"
        "end 0x1021->0x0 t=2002 n=0\n"
        "gap text: no code bytes for 0x1040 (module not found or not mapped)\n"
        "missing code at 0x1040\n");
}

// Issue 24 (decode fuzz class 2b): a TIP with its IP suppressed (0x0d) at the indirect branch at
// 0x1025. The target is not in the trace: the walker ends with a "no ip" gap naming the offset
// just past the TIP and resumes at the next PSB. libipt 2.0.5 does the same while its block cache
// has no entry for the branch; once it has one (the branch ran before), its cached path
// (pt_blk_proceed_no_event_cached, ptbq_indirect) ignores the suppression, runs the branch a
// second time and fails on the next packet. decode_differential.h allows exactly that difference.
struct SuppressedTipTrace {
  std::vector<uint8_t> bytes;
  size_t tip = 0;  // the 0x0d's offset
  size_t psb = 0;  // the PSB after it
};
// `cyc_after_tip`: a CYC right behind the 0x0d, which the query decoder reads past before it
// reports, so the walker's gap names the offset after the CYC (a fuzz input had that shape).
SuppressedTipTrace SuppressedTipAfter(int passes, bool cyc_after_tip = false) {
  PtBuilder pt;
  pt.Psb(1000, 0x1025);
  for (int i = 0; i < passes; ++i) {
    pt.Cyc(i == 0 ? 1 : 3);
    pt.Ip(ppt_tip, 0x1027);  // jmp *%rax at 1001, 1004, ...
  }
  pt.Cyc(passes == 0 ? 1 : 3);
  SuppressedTipTrace trace;
  trace.tip = pt.bytes().size();
  pt.Ip(ppt_tip, 0);  // jmp *%rax once more: its target suppressed
  if (cyc_after_tip) pt.Cyc(1);
  pt.Tnt({true});     // what libipt's second query of the same branch meets
  trace.psb = pt.bytes().size();
  ResumeToSyscall(pt);
  trace.bytes = pt.bytes();
  return trace;
}

testing::DecodedPair DecodeBoth(std::span<const uint8_t> pt) {
  const std::vector<uint8_t> trace(pt.begin(), pt.end());
  bool refused = false;
  testing::DecodedPair both;
  both.libipt.text = DecodeWith(trace, TestCode(), nullptr, &refused, /*gap_texts=*/true);
  WalkerCache cache;
  both.walker.text = DecodeWith(trace, TestCode(), &cache, &refused, /*gap_texts=*/true);
  CHECK_FALSE(refused);
  return both;
}

TEST_CASE("a suppressed-IP TIP at an indirect branch run before: the walker's gap names it") {
  const SuppressedTipTrace trace = SuppressedTipAfter(2);
  REQUIRE(trace.bytes[trace.tip] == 0x0d);
  const testing::DecodedPair both = DecodeBoth(trace.bytes);
  CHECK(both.walker.text ==
        "jump 0x1025->0x1027 t=1001 n=1\n"
        "jump 0x1028->0x1025 t=1003 n=2\n"
        "jump 0x1025->0x1027 t=1004 n=1\n"
        "jump 0x1028->0x1025 t=1006 n=2\n"
        "jump 0x1025->0x0 t=1007 n=1\n"
        "gap 0x0->0x0 cause=decode error t=1007 n=0\n"
        "syscall 0x1021->0x0 t=2002 n=2\n"
        "end 0x1021->0x0 t=2002 n=0\n"
        "gap text: no ip at trace offset " + std::to_string(trace.tip + 1) + "\n");
  // libipt's cached path: the branch counted twice (a jump to itself); its second query fails
  // where its query decoder stands then, past the PSB+ that follows (37 bytes).
  CHECK(both.libipt.text ==
        "jump 0x1025->0x1027 t=1001 n=1\n"
        "jump 0x1028->0x1025 t=1003 n=2\n"
        "jump 0x1025->0x1027 t=1004 n=1\n"
        "jump 0x1028->0x1025 t=1006 n=2\n"
        "jump 0x1025->0x1025 t=1007 n=1\n"
        "jump 0x1025->0x0 t=1008 n=1\n"
        "gap 0x0->0x0 cause=decode error t=1008 n=0\n"
        "syscall 0x1021->0x0 t=2002 n=2\n"
        "end 0x1021->0x0 t=2002 n=0\n"
        "gap text: trace stream does not match query at trace offset " +
            std::to_string(trace.psb + 37) + "\n");
  CHECK(testing::CompareDecoders(trace.bytes, DecodeBoth) == "");
}

TEST_CASE("a suppressed-IP TIP with a CYC behind it: the gap names the offset after the CYC, "
          "and the differential finds the TIP before it") {
  const SuppressedTipTrace trace = SuppressedTipAfter(2, /*cyc_after_tip=*/true);
  REQUIRE(trace.bytes[trace.tip] == 0x0d);
  REQUIRE(trace.bytes[trace.tip + 1] == 0x0b);  // CYC 1, one byte (the fuzz input's was 0x7b)
  const testing::DecodedPair both = DecodeBoth(trace.bytes);
  const std::string gap = "gap text: no ip at trace offset " + std::to_string(trace.tip + 2);
  CHECK(both.walker.text.find(gap) != std::string::npos);
  CHECK(both.libipt.text != both.walker.text);
  CHECK(testing::SuppressedTipEndingAt(trace.bytes, trace.tip + 2).tip == trace.tip);
  CHECK(testing::SuppressedTipEndingAt(trace.bytes, trace.tip + 1).tip == trace.tip);
  // After the TNT behind the CYC, or before the TIP: no suppressed TIP ends there.
  CHECK(testing::SuppressedTipEndingAt(trace.bytes, trace.tip + 3).gap == 0);
  CHECK(testing::SuppressedTipEndingAt(trace.bytes, trace.tip).gap == 0);
  CHECK(testing::CompareDecoders(trace.bytes, DecodeBoth) == "");
}

TEST_CASE("a suppressed-IP TIP at an indirect branch's first run: both decoders give the gap") {
  const SuppressedTipTrace trace = SuppressedTipAfter(0);
  CHECK(Decode(trace.bytes, TestCode(), /*gap_texts=*/true) ==
        "jump 0x1025->0x0 t=1000 n=1\n"
        "gap 0x0->0x0 cause=decode error t=1000 n=0\n"
        "syscall 0x1021->0x0 t=2002 n=2\n"
        "end 0x1021->0x0 t=2002 n=0\n"
        "gap text: no ip at trace offset " + std::to_string(trace.tip + 1) + "\n");
}

// The exception is that one TIP, nothing else: a difference before it, after it, or a gap that
// does not follow a suppressed-IP TIP is still a difference.
TEST_CASE("the differential's exception for a suppressed-IP TIP still catches every other "
          "difference") {
  const SuppressedTipTrace trace = SuppressedTipAfter(2);
  const std::string gap = "no ip at trace offset " + std::to_string(trace.tip + 1);
  // The walker's output changed when it decodes `size` bytes: one instruction more.
  auto walker_differs_on = [&](size_t size) {
    return [size](std::span<const uint8_t> pt) {
      testing::DecodedPair both = DecodeBoth(pt);
      if (pt.size() == size) both.walker.instructions += 1;
      return both;
    };
  };
  const std::string before = testing::CompareDecoders(trace.bytes, walker_differs_on(trace.tip));
  CHECK(before.rfind("in the trace before the suppressed-IP TIP at trace offset " +
                         std::to_string(trace.tip) + ": QueryWalker and libipt's block decoder "
                         "differ:\n",
                     0) == 0);
  const std::string after = testing::CompareDecoders(
      trace.bytes, walker_differs_on(trace.bytes.size() - trace.psb));
  CHECK(after.rfind("in the trace from the PSB at offset " + std::to_string(trace.psb) +
                        " after the suppressed-IP TIP at trace offset " +
                        std::to_string(trace.tip) + " (offsets from that PSB): QueryWalker",
                    0) == 0);
  // The walker's gap names another offset: not the exception.
  auto gap_moved = [&](std::span<const uint8_t> pt) {
    testing::DecodedPair both = DecodeBoth(pt);
    const size_t at = both.walker.text.find(gap);
    if (at != std::string::npos) {
      both.walker.text.replace(at, gap.size(),
                               "no ip at trace offset " + std::to_string(trace.tip + 2));
    }
    return both;
  };
  CHECK(testing::CompareDecoders(trace.bytes, gap_moved).rfind(
            "QueryWalker and libipt's block decoder differ:\n", 0) == 0);
  // The same trace with a TIP that has its IP (0x1027): the decoders must agree exactly, and do.
  PtBuilder pt;
  pt.Psb(1000, 0x1025);
  pt.Cyc(1);
  pt.Ip(ppt_tip, 0x1027);
  pt.Cyc(3);
  pt.Ip(ppt_tip, 0x1027);
  pt.Cyc(3);
  pt.Ip(ppt_tip, 0x1027);
  ResumeToSyscall(pt);
  CHECK(testing::CompareDecoders(pt.bytes(), DecodeBoth) == "");
}

// A call's length comes from a table keyed by (pid, address) that the decoders of one worker
// share (with the walker: from its run, keyed by section): two processes with different calls
// at the same address must each get their own.
// pid 1: TestCode(), a 5-byte `call 0x1010` at 0x1001. pid 2: a 2-byte `call *%rax` at 0x1001,
// then nop; syscall; and a ret at 0x1010.
TEST_CASE("calls at one address in two processes keep their own lengths (shared worker cache)") {
  std::vector<uint8_t> other(0x40, 0x90);
  other[0x01] = 0xff;  // call *%rax
  other[0x02] = 0xd0;
  other[0x04] = 0x0f;  // syscall
  other[0x05] = 0x05;
  other[0x10] = 0xc3;  // ret
  CodeFile file1(TestCode());
  CodeFile file2(other);
  symbols::AddressSpace space;
  space.Map(1, 0, kBase, 0x40, 0, space.InternModule(file1.path(), {}));
  space.Map(2, 0, kBase, 0x40, 0, space.InternModule(file2.path(), {}));
  symbols::ModuleResolver resolver({});
  CodeImages images(space, resolver);
  images.Prepare({1, 2});
  DecoderSetup setup;
  setup.nom_freq = 1;
  BlockFacts shared;
  WalkerCache* walker_cache = nullptr;  // the walker's runs carry their call's length instead
  auto decode = [&](uint32_t pid, const std::vector<uint8_t>& trace) {
    UnitEvents unit;
    FlowDecoder decoder(setup, images, pid, shared, unit);
    if (walker_cache != nullptr) decoder.UseWalker(walker_cache);
    decoder.DecodeSegment(trace.data(), trace.size());
    CHECK_FALSE(decoder.walker_refused());
    return Describe(unit);
  };
  PtBuilder direct;  // pid 1: call, compressed return, then tracing stops at the syscall
  direct.Psb(1000, 0x1000);
  direct.Cyc(4);
  direct.Tnt({true, true});
  direct.Cyc(4);
  direct.Ip(ppt_tip_pgd, 0);
  PtBuilder indirect;  // pid 2: call *%rax to 0x1010, compressed return, syscall
  indirect.Psb(1000, 0x1000);
  indirect.Cyc(2);
  indirect.Ip(ppt_tip, 0x1010);
  indirect.Cyc(2);
  indirect.Tnt({true});
  indirect.Cyc(2);
  indirect.Ip(ppt_tip_pgd, 0);
  const std::string first_direct = decode(1, direct.bytes());
  CHECK(first_direct.starts_with("call 0x1001->0x1010 ret=0x1006 "));
  const std::string first_indirect = decode(2, indirect.bytes());
  CHECK(first_indirect.starts_with("call 0x1001->0x1010 ret=0x1003 "));
  CHECK(first_indirect.find("return 0x1010->0x1003 ") != std::string::npos);
  // Again, each after the other has taken the table's slot: the same events as the first time.
  CHECK(decode(1, direct.bytes()) == first_direct);
  CHECK(decode(2, indirect.bytes()) == first_indirect);
  // With the walker (one worker's cache of runs for both processes): the same events.
  WalkerCache runs;
  walker_cache = &runs;
  for (int round = 0; round < 2; ++round) {
    CHECK(decode(1, direct.bytes()) == first_direct);
    CHECK(decode(2, indirect.bytes()) == first_indirect);
  }
}

}  // namespace
}  // namespace ptscope::decode

TEST_CASE("gap and trigger texts are interned: equal texts share one stored string") {
  ptscope::decode::EventText first, second, other, none;
  first = std::string("trace overflow: the CPU dropped trace data");
  second = std::string("trace overflow: the CPU dropped trace data");
  other = std::string("decode error at offset 0x10");
  none = std::string();
  CHECK(first.str() == "trace overflow: the CPU dropped trace data");
  CHECK(&first.str() == &second.str());  // one copy, however many overflows
  CHECK(other.str() == "decode error at offset 0x10");
  CHECK(&other.str() != &first.str());
  CHECK(none.empty());
  CHECK(none.str().empty());
}

namespace ptscope::decode {
namespace {

TEST_CASE("QueryWalker refuses 32-bit code, and libipt's block decoder decodes it") {
  PtBuilder pt;
  pt.Simple(ppt_psb);
  pt.Tsc(1000);
  pt_packet mode{};
  mode.type = ppt_mode;
  mode.payload.mode.leaf = pt_mol_exec;
  mode.payload.mode.bits.exec = pt_set_exec_mode(ptem_32bit);
  pt.Put(mode);
  pt.Ip(ppt_fup, 0x1020);
  pt.Simple(ppt_psbend);
  pt.Ip(ppt_tip_pgd, 0);
  bool refused = false;
  WalkerCache cache;
  DecodeWith(pt.bytes(), TestCode(), &cache, &refused);
  CHECK(refused);
  const std::string libipt = DecodeWith(pt.bytes(), TestCode(), nullptr, &refused);
  CHECK_FALSE(refused);
  CHECK(libipt.find("syscall 0x1021") != std::string::npos);
}

}  // namespace
}  // namespace ptscope::decode
