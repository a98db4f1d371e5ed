// pt-record --selftest without PT hardware: the packet scanner on hand-made packets, the checker
// on genuine PT of the workload (pt-emulate single-steps `pt-record --selftest-workload`) and on
// that PT damaged, and the whole self-test against the kernel model, the hardware writing the
// emulated PT. PTSCOPE_PT_EMULATE and PTSCOPE_PT_RECORD name the binaries (see meson.build).
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>

#include "model_session.h"
#include "pt_packet_scan.h"
#include "selftest.h"

namespace ptscope::record::testing {
namespace {

using Kind = PtControlEvent::Kind;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == 0)
    throw std::runtime_error(std::string(name) + " is not set (run through meson test)");
  return value;
}

// The workload's PT as pt-emulate encodes it: traced from the workload's entry, returns
// uncompressed, as pt-record --selftest configures the hardware.
const std::vector<uint8_t>& EmulatedWorkloadPt() {
  static const std::vector<uint8_t> pt = [] {
    TempDir dir{"ptscope-model"};
    const std::string archive = dir / "emulated.ptar";
    const std::string command = Env("PTSCOPE_PT_EMULATE") +
                                " --full --no-retcomp --start-at ptscope_selftest_workload -o " +
                                archive + " -- " + Env("PTSCOPE_PT_RECORD") + " " +
                                kSelftestWorkloadArg + " 2>/dev/null";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
    std::vector<uint8_t> bytes;
    for (const format::PtDataChunk& piece : ReadComplete(archive).pt_data)
      bytes.insert(bytes.end(), piece.data.begin(), piece.data.end());
    return bytes;
  }();
  return pt;
}

std::vector<PtControlEvent> Scan(const std::vector<uint8_t>& bytes) {
  std::vector<PtControlEvent> events;
  Status status = ScanPtPackets(bytes, [&](const PtControlEvent& e) { events.push_back(e); });
  if (!status) throw std::runtime_error(status.error().message);
  return events;
}

TEST_CASE("scanner: TNT bits oldest first, IPs through last-IP compression, PSB+ marked") {
  const std::vector<uint8_t> bytes = {
      0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
      0x02, 0x82,                                                  // PSB
      0xdd, 0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0x00, 0x00,        // FUP, full IP (in PSB+)
      0x02, 0x23,                                                  // PSBEND
      0xd1, 0x00, 0x10, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00,        // TIP.PGE 0x401000
      0x0c,                                                        // TNT-8: stop bit 3, 1 0
      0x2d, 0x34, 0x12,                                            // TIP, low 16 bits: 0x401234
      0x07, 0x02,                                                  // CYC with one more byte
      0x59, 0x01, 0x99, 0x01,                                      // MTC, MODE
      0x02, 0xa3, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00,              // long TNT: stop bit 2, 0 1
      0x02, 0xf3,                                                  // OVF
      0x01,                                                        // TIP.PGD, IP suppressed
      0x00};                                                       // PAD
  std::vector<PtControlEvent> e = Scan(bytes);
  REQUIRE(e.size() == 10);
  CHECK(e[0].kind == Kind::kPsb);
  CHECK(e[1].kind == Kind::kFup);
  CHECK(e[1].in_psb_plus);
  CHECK(*e[1].ip == 0xba9876543210);
  CHECK(e[2].kind == Kind::kTipPge);
  CHECK(!e[2].in_psb_plus);
  CHECK(*e[2].ip == 0x401000);
  CHECK((e[3].kind == Kind::kTnt && e[3].taken && e[4].kind == Kind::kTnt && !e[4].taken));
  CHECK(e[5].kind == Kind::kTip);
  CHECK(*e[5].ip == 0x401234);
  CHECK(e[5].offset == 37);
  CHECK((e[6].kind == Kind::kTnt && !e[6].taken && e[7].kind == Kind::kTnt && e[7].taken));
  CHECK(e[8].kind == Kind::kOvf);
  CHECK(e[9].kind == Kind::kTipPgd);
  CHECK(!e[9].ip);
}

TEST_CASE("scanner: a byte that starts no packet, or a cut packet, names its offset") {
  const std::vector<uint8_t> reserved = {0x00, 0x00, 0x39};
  Status status = ScanPtPackets(reserved, [](const PtControlEvent&) {});
  REQUIRE(!status);
  CHECK(status.error().message == "PT byte offset 2: no PT packet starts with this byte");
  const std::vector<uint8_t> cut = {0x19, 0x01, 0x02};
  status = ScanPtPackets(cut, [](const PtControlEvent&) {});
  REQUIRE(!status);
  CHECK(status.error().message == "PT byte offset 0: the stream ends inside a packet");
}

TEST_CASE("checker: the workload's genuine PT passes, with the counts of its code") {
  SelftestVerdict verdict = CheckSelftestTrace(EmulatedWorkloadPt(), WorkloadLayout());
  CHECK_MESSAGE(verdict.pass, verdict.detail);
  CHECK(verdict.detail ==
        "10000 calls, 10000 loop branches (the last not taken), 40004 instructions, as the code "
        "does");
}

TEST_CASE("checker: each kind of difference fails with the event that differed") {
  const std::vector<uint8_t>& good = EmulatedWorkloadPt();
  std::vector<PtControlEvent> events = Scan(good);
  const SelftestLayout layout = WorkloadLayout();
  // The last loop branch, made taken (a short TNT's single bit).
  size_t last_tnt = 0;
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].kind == Kind::kTnt) last_tnt = i;
  {
    std::vector<uint8_t> bad = good;
    uint8_t& tnt = bad[events[last_tnt].offset];
    REQUIRE(tnt == 0x04);  // TNT-8 holding one not-taken bit
    tnt = 0x06;
    SelftestVerdict verdict = CheckSelftestTrace(bad, layout);
    CHECK(!verdict.pass);
    CHECK(verdict.detail == "PT byte offset " + std::to_string(events[last_tnt].offset) +
                                " (after 10000 calls): loop branch 10000 was taken, expected "
                                "not taken");
  }
  // A return elsewhere: the low byte of the 5000th return's IP changed.
  {
    int tips = 0;
    size_t at = 0;
    for (const PtControlEvent& e : events)
      if (e.kind == Kind::kTip && ++tips == 5000) at = e.offset;
    std::vector<uint8_t> bad = good;
    REQUIRE((bad[at] & 0x1f) == 0x0d);
    bad[at + 1] ^= 0x01;
    SelftestVerdict verdict = CheckSelftestTrace(bad, layout);
    CHECK(!verdict.pass);
    CHECK(verdict.detail.find("PT byte offset " + std::to_string(at) +
                              " (after 4999 calls): a TIP to ") == 0);
  }
  // Cut in the middle: the counts say how far it got.
  {
    std::vector<uint8_t> half(good.begin(), good.begin() + events[last_tnt / 2].offset);
    SelftestVerdict verdict = CheckSelftestTrace(half, layout);
    CHECK(!verdict.pass);
    CHECK(verdict.detail.find("the trace ends after ") == 0);
  }
  // An overflow.
  {
    std::vector<uint8_t> bad = good;
    const std::vector<uint8_t> ovf = {0x02, 0xf3};
    bad.insert(bad.begin() + static_cast<ptrdiff_t>(events[last_tnt].offset), ovf.begin(),
               ovf.end());
    SelftestVerdict verdict = CheckSelftestTrace(bad, layout);
    CHECK(!verdict.pass);
    CHECK(verdict.detail.find("the hardware overflowed (OVF)") != std::string::npos);
  }
}

// The hardware pauses the trace at every interrupt (the kernel is not traced): FUP, TIP.PGD, then
// TIP.PGE where the workload resumes; that is no difference, but resuming elsewhere is.
TEST_CASE("checker: interrupts inside the workload pass; resuming outside it fails") {
  const std::vector<uint8_t>& good = EmulatedWorkloadPt();
  std::vector<PtControlEvent> events = Scan(good);
  const SelftestLayout layout = WorkloadLayout();
  uint64_t base = 0;
  size_t at = 0;
  int tips = 0;
  for (const PtControlEvent& e : events) {
    if (e.kind == Kind::kTipPge && base == 0) base = *e.ip;
    if (e.kind == Kind::kTip && ++tips == 5000) at = e.offset;
  }
  REQUIRE(base != 0);
  auto full_ip = [](uint8_t header, uint64_t ip) {  // IPBytes 6: the whole IP
    std::vector<uint8_t> packet = {header};
    for (int i = 0; i < 8; ++i) packet.push_back(static_cast<uint8_t>(ip >> (8 * i)));
    return packet;
  };
  auto interrupted = [&](uint64_t resume) {
    std::vector<uint8_t> pause = full_ip(0xdd, base + layout.return_site);  // FUP
    pause.push_back(0x01);                                                // TIP.PGD, no IP
    const std::vector<uint8_t> pge = full_ip(0xd1, resume);               // TIP.PGE
    pause.insert(pause.end(), pge.begin(), pge.end());
    std::vector<uint8_t> bytes = good;
    bytes.insert(bytes.begin() + static_cast<ptrdiff_t>(at), pause.begin(), pause.end());
    return CheckSelftestTrace(bytes, layout);
  };
  SelftestVerdict paused = interrupted(base + layout.return_site);
  CHECK_MESSAGE(paused.pass, paused.detail);
  SelftestVerdict elsewhere = interrupted(base + layout.size + 0x40);
  CHECK(!elsewhere.pass);
  char resumed[24];
  std::snprintf(resumed, sizeof resumed, "+0x%llx",
                static_cast<unsigned long long>(layout.size + 0x40));
  CHECK(elsewhere.detail == "PT byte offset " + std::to_string(at + 10) +
                                " (after 4999 calls): tracing resumed at " + resumed +
                                ", outside the workload");
}

// The self-test as pt-record runs it, against the kernel model: the hardware writes the
// workload's emulated PT once the target runs.
struct ModelSelftest {
  explicit ModelSelftest(KernelModel& model, std::vector<uint8_t> pt) : run(model) {
    options.workload_file = Env("PTSCOPE_PT_RECORD");
    options.workload_argv = {"/bin/sleep", "0.3"};  // the model, not the process, writes PT
    options.output = run.dir / "selftest.ptar";
    options.drop_privileges = false;
    options.tool_version = "test";
    model.on_poll = [this, pt = std::move(pt)](KernelModel& m) {
      if (written) return;
      pid = run.TargetPid();
      for (int fd : m.Fds())
        if (m.Event(fd)->pt) pt_filters.push_back(m.Event(fd)->filters);
      m.SchedIn(pid, pid, 0);
      m.WritePt(pid, pt);
      m.SchedOut(pid);
      written = true;
    };
  }
  Result<SelftestVerdict> Run() {
    return RunSelftest(run.model, run.facts, options,
                       [this](const std::string& line) { run.notes.push_back(line); });
  }
  ModelRun run;
  SelftestOptions options;
  bool written = false;
  int pid = -1;
  std::vector<std::vector<std::string>> pt_filters;  // of each PT event, as the target ran
};

TEST_CASE("selftest against the kernel model: full mode, the workload's filter, PASS") {
  KernelModel model;
  ModelSelftest selftest(model, EmulatedWorkloadPt());
  auto verdict = selftest.Run();
  REQUIRE_MESSAGE(verdict, verdict.error().message);
  CHECK_MESSAGE(verdict->pass, verdict->detail);
  // The PT event asked for exactly the workload's code, returns uncompressed, every byte.
  char size[32];
  std::snprintf(size, sizeof size, "/0x%llx@",
                static_cast<unsigned long long>(WorkloadLayout().size));
  REQUIRE(selftest.pt_filters.size() == 1);
  REQUIRE(selftest.pt_filters[0].size() == 1);
  const std::string& filter = selftest.pt_filters[0][0];
  CHECK(filter.find("filter 0x") == 0);
  CHECK(filter.find(size + Env("PTSCOPE_PT_RECORD")) != std::string::npos);
  CHECK(ReadComplete(selftest.options.output).pt_data.size() >= 1);
}

TEST_CASE("selftest against the kernel model: PT that does not match fails, naming why") {
  KernelModel model;
  std::vector<uint8_t> pt = EmulatedWorkloadPt();
  pt.resize(pt.size() / 2);
  ModelSelftest selftest(model, pt);
  auto verdict = selftest.Run();
  REQUIRE_MESSAGE(verdict, verdict.error().message);
  CHECK(!verdict->pass);
  CHECK(!verdict->detail.empty());
}

}  // namespace
}  // namespace ptscope::record::testing
