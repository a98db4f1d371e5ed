// pt-emulate's packet encoder checked against libipt's own decoders: a scripted execution over
// real x86 bytes is encoded, then pt_insn and pt_blk must reproduce exactly the same instruction
// sequence (and, for timing, exactly the virtual time of every TIP-producing branch).
#include <doctest/doctest.h>
#include <intel-pt.h>

#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include "insn_classifier.h"
#include "pt_encoder_model.h"

namespace ptscope::emulate {
namespace {

constexpr uint64_t kBase = 0x7f0000400000;  // needs more than 32 bits: exercises sext-48
constexpr size_t kSize = 0x4000;

struct Sink : PtPacketSink {
  std::vector<uint8_t> bytes;
  std::vector<size_t> psbs;
  void Append(const uint8_t* b, size_t n) override { bytes.insert(bytes.end(), b, b + n); }
  void MarkPsb() override { psbs.push_back(bytes.size()); }
};

// A tiny machine: code bytes at kBase (nop-filled), a scripted choice for every conditional and
// indirect branch, a real return stack. Produces the ground truth and feeds the encoder.
struct Machine {
  std::vector<uint8_t> mem = std::vector<uint8_t>(kSize, 0x90);
  std::deque<bool> conds;                  // taken?, in execution order
  std::deque<uint64_t> indirect_targets;   // for indirect jumps/calls, in execution order
  std::map<uint64_t, uint64_t> async_at;   // at ip (before it executes): deliver to handler
  std::vector<uint64_t> stack;
  std::vector<uint64_t> truth;             // retired ips
  std::vector<std::pair<int, uint64_t>> events;  // (pt_event_type, tsc) expected from a decoder
  std::map<uint64_t, uint64_t> pause_before;  // at ip: the clock jumps (other threads ran)
  uint64_t exit_ip = 0;

  void Put(uint64_t at, std::vector<uint8_t> code) {
    std::memcpy(&mem[at - kBase], code.data(), code.size());
  }
  static std::vector<uint8_t> Rel32(uint8_t op, uint64_t at, uint64_t target) {
    const int32_t d = static_cast<int32_t>(target - (at + 5));
    std::vector<uint8_t> out{op};
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(d >> (8 * i)));
    return out;
  }
  void Call(uint64_t at, uint64_t target) { Put(at, Rel32(0xe8, at, target)); }
  void Jmp(uint64_t at, uint64_t target) { Put(at, Rel32(0xe9, at, target)); }
  void Je(uint64_t at, uint64_t target) {  // 0f 84 rel32
    const int32_t d = static_cast<int32_t>(target - (at + 6));
    std::vector<uint8_t> code{0x0f, 0x84};
    for (int i = 0; i < 4; ++i) code.push_back(static_cast<uint8_t>(d >> (8 * i)));
    Put(at, code);
  }

  void Run(uint64_t ip, PtEncoderModel& model, uint64_t limit = 1000000) {
    uint64_t tsc = 1000;
    for (uint64_t n = 0; n < limit; ++n) {
      if (auto it = pause_before.find(ip); it != pause_before.end()) {
        tsc += it->second;
        pause_before.erase(it);
      }
      if (auto it = async_at.find(ip); it != async_at.end()) {
        events.push_back({model.enabled() ? ptev_async_branch : ptev_enabled, tsc});
        model.AsyncBranch(ip, it->second, tsc);
        stack.push_back(ip);  // the handler "returns" (via sigreturn-like TIP) here
        ip = it->second;
        async_at.erase(it);
        continue;
      }
      const ClassifiedInsn c = ClassifyInstruction(&mem[ip - kBase], 15, ip);
      REQUIRE(c.size > 0);
      RetiredInsn r{ip, ip + c.size, ip + c.size, c.cls};
      switch (c.cls) {
        case InsnClass::kCondBranch:
          REQUIRE(!conds.empty());
          if (conds.front()) r.next_ip = c.direct_target;
          conds.pop_front();
          break;
        case InsnClass::kJump: r.next_ip = c.direct_target; break;
        case InsnClass::kCall:
          r.next_ip = c.direct_target;
          stack.push_back(r.fallthrough);
          break;
        case InsnClass::kIndirectCall: stack.push_back(r.fallthrough); [[fallthrough]];
        case InsnClass::kIndirectJump:
          REQUIRE(!indirect_targets.empty());
          r.next_ip = indirect_targets.front();
          indirect_targets.pop_front();
          break;
        case InsnClass::kReturn:
          REQUIRE(!stack.empty());
          r.next_ip = stack.back();
          stack.pop_back();
          break;
        default: break;
      }
      truth.push_back(ip);
      if (!model.enabled()) events.push_back({ptev_enabled, tsc});
      if (c.cls == InsnClass::kSyscall) events.push_back({ptev_disabled, tsc});
      model.Retire(r, tsc);
      ++tsc;
      if (ip == exit_ip) {
        model.Disable(r.next_ip, tsc);
        return;
      }
      ip = r.next_ip;
    }
    FAIL("program did not reach exit_ip");
  }
};

int ReadMemory(uint8_t* buffer, size_t size, const pt_asid*, uint64_t ip, void* context) {
  const auto* m = static_cast<const Machine*>(context);
  if (ip < kBase || ip >= kBase + kSize) return -pte_nomap;
  const size_t n = std::min<size_t>(size, kBase + kSize - ip);
  std::memcpy(buffer, &m->mem[ip - kBase], n);
  return static_cast<int>(n);
}

pt_config DecoderConfig(std::vector<uint8_t>& bytes, const EncoderConfig& ec) {
  pt_config config;
  pt_config_init(&config);
  config.begin = bytes.data();
  config.end = bytes.data() + bytes.size();
  config.cpuid_0x15_eax = 1;
  config.cpuid_0x15_ebx = ec.tsc_per_ctc;
  config.mtc_freq = static_cast<uint8_t>(ec.mtc_freq);
  config.nom_freq = ec.cbr;
  return config;
}

struct Decoded {
  std::vector<uint64_t> ips;
  std::vector<std::pair<int, uint64_t>> events;  // enabled/disabled/async_branch with their tsc
  int errors = 0;
  int async_branches = 0;
};

Decoded DecodeInsn(Machine& m, std::vector<uint8_t>& bytes, const EncoderConfig& ec) {
  pt_config config = DecoderConfig(bytes, ec);
  pt_insn_decoder* dec = pt_insn_alloc_decoder(&config);
  REQUIRE(dec != nullptr);
  pt_image_set_callback(pt_insn_get_image(dec), ReadMemory, &m);
  Decoded out;
  for (;;) {
    int status = pt_insn_sync_forward(dec);
    if (status < 0) break;
    for (;;) {
      while (status & pts_event_pending) {
        pt_event ev;
        status = pt_insn_event(dec, &ev, sizeof(ev));
        if (status < 0) break;
        if (ev.type == ptev_async_branch) ++out.async_branches;
        const bool flow = ev.type == ptev_enabled || ev.type == ptev_disabled ||
                          ev.type == ptev_async_branch;
        if (flow && !ev.status_update) out.events.push_back({ev.type, ev.has_tsc ? ev.tsc : 0});
      }
      if (status < 0 || (status & pts_eos)) break;
      pt_insn insn{};
      status = pt_insn_next(dec, &insn, sizeof(insn));
      if (insn.iclass != ptic_error) out.ips.push_back(insn.ip);
      if (status < 0) break;
    }
    if (status < 0 && status != -pte_eos) ++out.errors;
  }
  pt_insn_free_decoder(dec);
  return out;
}

std::vector<uint64_t> DecodeBlocks(Machine& m, std::vector<uint8_t>& bytes, const EncoderConfig& ec) {
  pt_config config = DecoderConfig(bytes, ec);
  pt_block_decoder* dec = pt_blk_alloc_decoder(&config);
  REQUIRE(dec != nullptr);
  pt_image_set_callback(pt_blk_get_image(dec), ReadMemory, &m);
  std::vector<uint64_t> ips;
  for (;;) {
    int status = pt_blk_sync_forward(dec);
    if (status < 0) break;
    for (;;) {
      while (status & pts_event_pending) {
        pt_event ev;
        status = pt_blk_event(dec, &ev, sizeof(ev));
        if (status < 0) break;
      }
      if (status < 0 || (status & pts_eos)) break;
      pt_block block{};
      status = pt_blk_next(dec, &block, sizeof(block));
      uint64_t ip = block.ip;
      for (uint16_t i = 0; i < block.ninsn; ++i) {  // re-walk: blocks follow direct jumps/calls
        ips.push_back(ip);
        const ClassifiedInsn c = ClassifyInstruction(&m.mem[ip - kBase], 15, ip);
        const bool follow = c.cls == InsnClass::kJump || c.cls == InsnClass::kCall;
        ip = follow ? c.direct_target : ip + c.size;
      }
      if (status < 0) break;
    }
  }
  pt_blk_free_decoder(dec);
  return ips;
}

// main: call f; jmp rax (-> cont); cont: call rax (-> g); syscall; <nops>; exit syscall.
// f: recursive, depth chosen by the je bits. g: jump-table-like indirect jump, then ret.
Machine BuildProgram(int depth) {
  Machine m;
  const uint64_t main = kBase, f = kBase + 0x1000, g = kBase + 0x2000, cont = kBase + 0x40;
  m.Call(main, f);                          // +0  call f
  m.Put(main + 5, {0xff, 0xe0});            // +5  jmp rax -> cont
  m.Put(cont, {0xff, 0xd0});                // call rax -> g
  m.Put(cont + 2, {0x0f, 0x05});            // syscall
  m.Put(cont + 4, {0xe8, 0, 0, 0, 0});      // call next (zero-length, PIC idiom)
  m.Put(cont + 9, {0x58});                  // pop rax (no-op for our machine)
  m.Put(cont + 0x30, {0x0f, 0x05});         // exit
  m.exit_ip = cont + 0x30;
  m.Je(f, f + 0x20);                        // f: je done
  m.Call(f + 6, f);                         //    call f
  m.Put(f + 11, {0x74, 0x02});              //    je +2 (skip two nops)
  m.Jmp(f + 15, f + 0x20);                  //    jmp done
  m.Put(f + 0x20, {0xc3});                  // done: ret
  m.Put(g, {0xff, 0xe1});                   // g: jmp rcx -> g+0x10
  m.Put(g + 0x10, {0xc3});                  //    ret
  for (int i = 0; i < depth; ++i) m.conds.push_back(false);
  m.conds.push_back(true);
  for (int i = 0; i < depth; ++i) m.conds.push_back(i % 2 == 0);
  m.indirect_targets = {cont, g, g + 0x10};
  return m;
}

void CheckRoundTrip(int depth, EncoderConfig ec) {
  Machine m = BuildProgram(depth);
  Sink sink;
  PtEncoderModel model(ec, &sink);
  m.Run(kBase, model);
  REQUIRE(!sink.psbs.empty());
  CHECK(sink.psbs.front() == 0);
  const Decoded d = DecodeInsn(m, sink.bytes, ec);
  CHECK(d.errors == 0);
  CHECK(d.ips == m.truth);
  const auto blocks = DecodeBlocks(m, sink.bytes, ec);
  if (blocks != m.truth) {
    size_t i = 0;
    while (i < blocks.size() && i < m.truth.size() && blocks[i] == m.truth[i]) ++i;
    MESSAGE("blk " << blocks.size() << " truth " << m.truth.size() << " first diff " << i
            << " blk=" << (i < blocks.size() ? blocks[i] - kBase : 0) << " truth=" << (i < m.truth.size() ? m.truth[i] - kBase : 0));
  }
  CHECK(blocks == m.truth);
}

TEST_CASE("recursion deeper than the 64-entry return stack decodes exactly") {
  for (int depth : {1, 63, 64, 65, 200}) {
    CAPTURE(depth);
    CheckRoundTrip(depth, EncoderConfig{});
  }
}

TEST_CASE("every timing mode and no return compression decode exactly") {
  for (TimingMode t : {TimingMode::kNone, TimingMode::kTsc, TimingMode::kMtc, TimingMode::kCyc}) {
    for (bool retcomp : {true, false}) {
      EncoderConfig ec;
      ec.timing = t;
      ec.return_compression = retcomp;
      CAPTURE(static_cast<int>(t));
      CAPTURE(retcomp);
      CheckRoundTrip(100, ec);
    }
  }
}

TEST_CASE("a disable at an arbitrary instruction (detach) ends the decode exactly there") {
  for (TimingMode t : {TimingMode::kNone, TimingMode::kCyc}) {
    Machine m = BuildProgram(5);
    m.exit_ip = kBase + 0x40 + 9;  // pop rax: not a branch
    EncoderConfig ec;
    ec.timing = t;
    Sink sink;
    PtEncoderModel model(ec, &sink);
    m.Run(kBase, model);
    CHECK_FALSE(model.enabled());
    const Decoded d = DecodeInsn(m, sink.bytes, ec);
    CHECK(d.errors == 0);
    CHECK(d.ips == m.truth);
  }
}

TEST_CASE("a tiny PSB period (PSB+ with FUP mid-recursion) still decodes exactly") {
  EncoderConfig ec;
  ec.psb_period = 16;
  Machine m = BuildProgram(150);
  Sink sink;
  PtEncoderModel model(ec, &sink);
  m.Run(kBase, model);
  CHECK(sink.psbs.size() > 10);
  const Decoded d = DecodeInsn(m, sink.bytes, ec);
  CHECK(d.errors == 0);
  CHECK(d.ips == m.truth);
  // Each PSB segment must decode on its own from its PSB (what snapshot rings rely on).
  for (size_t i = 0; i < sink.psbs.size(); ++i) {
    std::vector<uint8_t> tail(sink.bytes.begin() + static_cast<long>(sink.psbs[i]), sink.bytes.end());
    const Decoded t = DecodeInsn(m, tail, ec);
    CHECK(t.errors == 0);
    REQUIRE(t.ips.size() <= m.truth.size());
    CHECK(std::equal(t.ips.begin(), t.ips.end(), m.truth.end() - static_cast<long>(t.ips.size())));
  }
}

TEST_CASE("signal-like asynchronous transfer: FUP + TIP decodes as an async branch") {
  Machine m = BuildProgram(3);
  const uint64_t handler = kBase + 0x3000;
  m.Put(handler, {0x90, 0xc3});  // handler: nop; ret (returns to the interrupted ip)
  m.async_at[kBase + 0x1000 + 6] = handler;  // before the first `call f` inside f
  Sink sink;
  EncoderConfig ec;
  PtEncoderModel model(ec, &sink);
  m.Run(kBase, model);
  const Decoded d = DecodeInsn(m, sink.bytes, ec);
  CHECK(d.errors == 0);
  CHECK(d.async_branches == 1);
  CHECK(d.ips == m.truth);
}

// xbegin and xend take no TNT bit (Zydis files them as conditional branches; libipt's
// pt_instruction_decode does not). A committed transaction is plain flow; an abort, which the
// stepping loop sees as unexpected flow to xbegin's fallback, is FUP + TIP (hardware writes
// MODE.TSX first, which pt-emulate leaves out). Both must decode exactly with libipt.
TEST_CASE("xbegin and xend write no TNT bit; an abort to the fallback is an async branch") {
  auto run = [](bool abort) {
    Machine m;
    const uint64_t fallback = kBase + 0x100, join = kBase + 0x40;
    m.Put(kBase, {0xc7, 0xf8, 0xfa, 0x00, 0x00, 0x00});  // +0   xbegin fallback
    m.Put(kBase + 7, {0x0f, 0x01, 0xd5});                  // +7   xend (+6 is a nop)
    m.Je(kBase + 10, join);                                // +10  je join (taken)
    m.Je(join, join + 0x20);                               // join: je (not taken)
    m.Put(join + 0x20, {0x0f, 0x05});                      //       nops; exit
    m.exit_ip = join + 0x20;
    m.Jmp(fallback, join);                                 // fallback: jmp join
    m.conds = abort ? std::deque<bool>{false} : std::deque<bool>{true, false};
    if (abort) m.async_at[kBase + 6] = fallback;  // aborts right after xbegin
    Sink sink;
    EncoderConfig ec;
    PtEncoderModel model(ec, &sink);
    m.Run(kBase, model);
    CHECK(m.conds.empty());
    const Decoded d = DecodeInsn(m, sink.bytes, ec);
    CHECK(d.errors == 0);
    CHECK(d.async_branches == (abort ? 1 : 0));
    CHECK(d.ips == m.truth);
    CHECK(DecodeBlocks(m, sink.bytes, ec) == m.truth);
    return m.truth;
  };
  const std::vector<uint64_t> committed = run(false);
  REQUIRE(committed.size() >= 5);
  CHECK(committed[1] == kBase + 6);
  CHECK(committed[2] == kBase + 7);
  CHECK(committed[3] == kBase + 10);
  CHECK(committed[4] == kBase + 0x40);
  const std::vector<uint64_t> aborted = run(true);
  REQUIRE(aborted.size() >= 3);
  CHECK(aborted[1] == kBase + 0x100);
  CHECK(aborted[2] == kBase + 0x40);
}

TEST_CASE("an uncompressed return forgets older calls, so perf and libipt stay in step") {
  // perf pops its return stack on every RET, libipt only on compressed ones. After the handler's
  // RET goes out as a TIP, the outermost `ret` to main (whose call predates the handler) must not
  // be compressed either; both decoders then agree. Same program without the signal: compressed.
  auto run = [](bool with_signal) {
    Machine m = BuildProgram(3);
    const uint64_t handler = kBase + 0x3000;
    m.Put(handler, {0x90, 0xc3});
    if (with_signal) m.async_at[kBase + 0x1000 + 6] = handler;
    Sink sink;
    EncoderConfig ec;
    PtEncoderModel model(ec, &sink);
    m.Run(kBase, model);
    const Decoded d = DecodeInsn(m, sink.bytes, ec);
    CHECK(d.errors == 0);
    CHECK(d.ips == m.truth);
    return model.stats().compressed_returns;
  };
  const uint64_t plain = run(false);
  CHECK(plain == 5);  // 4 returns of f (main's call + 3 recursive) and g's return
  CHECK(run(true) == plain - 1);
}

TEST_CASE("CYC+MTC timing: libipt timestamps every enable, disable and async branch exactly") {
  // Long straight-line stretches and long pauses (as when other threads run) cross many MTC
  // edges. Event timestamps are what a decoder knows exactly (instruction times are step values
  // that libipt's read-ahead moves to the next packet).
  for (uint32_t mtc_freq : {0u, 3u, 6u}) {
    for (uint64_t psb_period : {64u, 4096u}) {
      CAPTURE(mtc_freq);
      CAPTURE(psb_period);
      Machine m;
      const uint64_t b = kBase + 0x1000, c = kBase + 0x2000, d = kBase + 0x3000;
      m.Put(kBase + 2000, {0xff, 0xe0});  // 2000 nops; jmp rax -> b
      m.Put(b + 300, {0xff, 0xd0});       // 300 nops; call rax -> c
      m.Put(c + 10, {0xff, 0xe1});        // 10 nops; jmp rcx -> d
      m.Put(d, {0x0f, 0x05});             // syscall
      m.Put(d + 2, {0xff, 0xe2});         // jmp rdx -> d + 0x10
      m.Put(d + 0x20, {0x0f, 0x05});      // exit
      m.exit_ip = d + 0x20;
      m.indirect_targets = {b, c, d, d + 0x10};
      m.pause_before[c] = 300000;
      m.pause_before[d + 2] = 5000;
      m.async_at[b + 100] = b + 200;      // a "signal" in the middle of a stretch
      m.async_at[d + 2] = d + 0x10;       // and one right after the syscall (an enable)
      EncoderConfig ec;
      ec.mtc_freq = mtc_freq;
      ec.psb_period = psb_period;
      Sink sink;
      PtEncoderModel model(ec, &sink);
      m.Run(kBase, model);
      const Decoded dec = DecodeInsn(m, sink.bytes, ec);
      CHECK(dec.errors == 0);
      CHECK(dec.ips == m.truth);
      CHECK(m.events.size() == 5);
      CHECK(dec.events == m.events);
    }
  }
}

TEST_CASE("classifier: the instruction classes PT cares about") {
  auto cls = [](std::vector<uint8_t> b) { return ClassifyInstruction(b.data(), b.size(), 0x1000); };
  CHECK(cls({0x74, 0x10}).cls == InsnClass::kCondBranch);
  CHECK(cls({0x74, 0x10}).direct_target == 0x1012);
  CHECK(cls({0xe2, 0xfe}).cls == InsnClass::kCondBranch);          // loop
  CHECK(cls({0xe8, 0, 0, 0, 0}).cls == InsnClass::kCall);
  CHECK(cls({0xff, 0x15, 0, 0, 0, 0}).cls == InsnClass::kIndirectCall);
  CHECK(cls({0xff, 0x25, 0, 0, 0, 0}).cls == InsnClass::kIndirectJump);  // PLT jmp *x(%rip)
  CHECK(cls({0xeb, 0x00}).cls == InsnClass::kJump);
  CHECK(cls({0xc3}).cls == InsnClass::kReturn);
  CHECK(cls({0xf3, 0xc3}).cls == InsnClass::kReturn);              // repz ret
  CHECK_FALSE(cls({0xf3, 0xc3}).repeats);
  CHECK(cls({0xf3, 0xa4}).repeats);                                // rep movsb
  CHECK(cls({0x0f, 0x05}).cls == InsnClass::kSyscall);
  CHECK(cls({0xcc}).cls == InsnClass::kSyscall);
  CHECK(cls({0xcc}).is_int3);
  CHECK(cls({0x48, 0x89, 0xe5}).cls == InsnClass::kOther);
  CHECK(cls({0x48, 0x89, 0xe5}).size == 3);
  CHECK(cls({0x0f}).size == 0);                                     // truncated
  // What pt-synth builds its blocks from (the same classifier, tools/ptgen).
  CHECK(cls({0xff, 0x25, 0, 0, 0, 0}).rip_indirect_jump);
  CHECK_FALSE(cls({0xff, 0xe0}).rip_indirect_jump);                 // jmp *%rax
  CHECK(cls({0xff, 0xe0}).cls == InsnClass::kIndirectJump);
  CHECK(cls({0xe8, 0x10, 0, 0, 0}).direct_target == 0x1015);
  CHECK(cls({0x0f, 0x05}).is_syscall);
  CHECK_FALSE(cls({0x0f, 0x05}).must_not_execute);
  // int3, ud2, hlt, iretq, int 0x80, ljmp *x(%rip)
  for (std::vector<uint8_t> bad : {std::vector<uint8_t>{0xcc}, {0x0f, 0x0b}, {0xf4}, {0x48, 0xcf},
                                   {0xcd, 0x80}, {0xff, 0x2d, 0, 0, 0, 0}})
    CHECK_MESSAGE(cls(bad).must_not_execute, "first byte " << int(bad[0]));
  CHECK_FALSE(cls({0xc3}).must_not_execute);
  CHECK_FALSE(cls({0x74, 0x10}).must_not_execute);
  // TSX: Zydis calls xbegin and xend conditional branches; PT gives them no TNT bit. A walk runs
  // neither (no transaction is ever begun, and xend outside one faults); xtest is harmless.
  CHECK(cls({0xc7, 0xf8, 0x10, 0, 0, 0}).cls == InsnClass::kOther);  // xbegin
  CHECK(cls({0xc7, 0xf8, 0x10, 0, 0, 0}).must_not_execute);
  CHECK(cls({0x0f, 0x01, 0xd5}).cls == InsnClass::kOther);           // xend
  CHECK(cls({0x0f, 0x01, 0xd5}).must_not_execute);
  CHECK(cls({0x0f, 0x01, 0xd6}).cls == InsnClass::kOther);           // xtest
  CHECK_FALSE(cls({0x0f, 0x01, 0xd6}).must_not_execute);
}

}  // namespace
}  // namespace ptscope::emulate
