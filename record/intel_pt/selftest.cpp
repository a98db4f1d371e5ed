#include "selftest.h"

#include <unistd.h>

#include <charconv>
#include <map>

#include "kernel_source.h"
#include "pt_filter.h"
#include "pt_packet_scan.h"
#include "ptscope/format.h"
#include "session.h"

// The workload, in assembly so that its control flow is exactly known to the checker whatever
// the compiler does: only direct calls and one conditional branch, position-independent (the
// offsets below hold in pt-record and in every test binary alike). It ends with exit_group(0)
// from inside the filtered range, so nothing after it is traced.
asm(R"(
    .text
    .globl ptscope_selftest_workload
    .type ptscope_selftest_workload, @function
ptscope_selftest_workload:
    movl $10000, %ecx
1:
    call ptscope_selftest_leaf
    .globl ptscope_selftest_return_site
ptscope_selftest_return_site:
    decl %ecx
    jnz 1b
    movl $231, %eax
    xorl %edi, %edi
    syscall
    ud2
ptscope_selftest_leaf:
    ret
    .globl ptscope_selftest_end
ptscope_selftest_end:
    .size ptscope_selftest_workload, .-ptscope_selftest_workload
)");

extern "C" char ptscope_selftest_workload[];
extern "C" char ptscope_selftest_return_site[];
extern "C" char ptscope_selftest_end[];
static_assert(ptscope::record::kSelftestCalls == 10000, "the loop count is in the assembly");

namespace ptscope::record {
namespace {

// "+0x1a": where an event's IP is, relative to the workload's entry.
std::string Offset(uint64_t offset) {
  char text[24] = "+0x";
  char* end = std::to_chars(text + 3, text + sizeof text, offset, 16).ptr;
  return std::string(text, end);
}

// The checker's state: which event the code must produce next.
class FlowCheck {
 public:
  explicit FlowCheck(const SelftestLayout& layout) : layout_(layout) {}

  void On(const PtControlEvent& e) {
    if (failed_) return;
    using Kind = PtControlEvent::Kind;
    switch (e.kind) {
      case Kind::kOvf:
        return Fail(e, "the hardware overflowed (OVF): trace was lost");
      case Kind::kPsb:
      case Kind::kFup:  // PSB+ state, or an asynchronous event before a TIP.PGD
      case Kind::kTipPgd:
        return;
      case Kind::kTipPge:
        if (!e.ip) return Fail(e, "a TIP.PGE without an IP");
        if (!base_) {
          base_ = *e.ip;
          return;
        }
        if (*e.ip - *base_ >= layout_.size)
          return Fail(e, "tracing resumed at " + Offset(*e.ip - *base_) +
                             ", outside the workload");
        return;
      case Kind::kTip:
        if (!base_) return Fail(e, "a TIP before tracing began at the workload's entry");
        if (!e.ip || *e.ip - *base_ != layout_.return_site)
          return Fail(e, "a TIP to " + (e.ip ? Offset(*e.ip - *base_) : "a suppressed IP") +
                             ", where only returns to " + Offset(layout_.return_site) +
                             " can occur");
        if (expect_branch_) return Fail(e, "a return where the loop branch should come");
        ++calls_;
        expect_branch_ = true;
        return;
      case Kind::kTnt: {
        if (!base_) return Fail(e, "a branch before tracing began at the workload's entry");
        if (!expect_branch_) return Fail(e, "a conditional branch where a return should come");
        if (++branches_ > kSelftestCalls) return Fail(e, "more loop iterations than the code has");
        const bool last = branches_ == kSelftestCalls;
        if (e.taken == last)
          return Fail(e, std::string("loop branch ") + std::to_string(branches_) + " was " +
                             (e.taken ? "taken" : "not taken") + ", expected " +
                             (last ? "not taken" : "taken"));
        expect_branch_ = false;
        return;
      }
    }
  }

  SelftestVerdict Verdict() const {
    if (failed_) return {false, failure_};
    if (!base_) return {false, "no TIP.PGE: the workload was never traced"};
    if (calls_ != kSelftestCalls || branches_ != kSelftestCalls)
      return {false, "the trace ends after " + std::to_string(calls_) + " of " +
                         std::to_string(kSelftestCalls) + " calls and " +
                         std::to_string(branches_) + " loop branches"};
    return {true, std::to_string(calls_) + " calls, " + std::to_string(branches_) +
                      " loop branches (the last not taken), " +
                      std::to_string(kSelftestInstructions) + " instructions, as the code does"};
  }

 private:
  void Fail(const PtControlEvent& e, const std::string& what) {
    failed_ = true;
    failure_ = "PT byte offset " + std::to_string(e.offset) + " (after " +
               std::to_string(calls_) + " calls): " + what;
  }

  SelftestLayout layout_;
  std::optional<uint64_t> base_;
  uint32_t calls_ = 0, branches_ = 0;
  bool expect_branch_ = false;
  bool failed_ = false;
  std::string failure_;
};

}  // namespace

void RunSelftestWorkload() {
  reinterpret_cast<void (*)()>(reinterpret_cast<uintptr_t>(ptscope_selftest_workload))();
  _exit(1);  // not reached: the workload exits
}

SelftestLayout WorkloadLayout() {
  SelftestLayout layout;
  const auto entry = reinterpret_cast<uintptr_t>(ptscope_selftest_workload);
  layout.return_site = reinterpret_cast<uintptr_t>(ptscope_selftest_return_site) - entry;
  layout.size = reinterpret_cast<uintptr_t>(ptscope_selftest_end) - entry;
  return layout;
}

SelftestVerdict CheckSelftestTrace(std::span<const uint8_t> pt, const SelftestLayout& layout) {
  FlowCheck check(layout);
  Status scanned = ScanPtPackets(pt, [&check](const PtControlEvent& e) { check.On(e); });
  SelftestVerdict verdict = check.Verdict();
  if (!scanned && (verdict.pass || verdict.detail.rfind("the trace ends", 0) == 0))
    return {false, scanned.error().message};
  return verdict;
}

Result<SelftestVerdict> RunSelftest(PerfKernel& kernel, const HostFacts& facts,
                                    const SelftestOptions& options,
                                    std::function<void(const std::string&)> note) {
  SessionOptions session;
  session.mode = SourceSettings::Mode::kRun;
  session.argv = options.workload_argv;
  session.output = options.output;
  session.snapshot = false;  // every byte: the checker needs the whole run
  session.drop_privileges = options.drop_privileges;
  session.tool_version = options.tool_version;
  session.command_line = "pt-record --selftest";
  KernelSourceOptions source_options;
  source_options.pt.no_retcomp = true;  // each return a TIP the checker can place
  PTSCOPE_ASSIGN_OR_RETURN(source_options.filter,
                           ResolvePtFilter("filter ptscope_selftest_workload @ " +
                                               options.workload_file,
                                           FilterLimitsOf(facts, false)));
  KernelPtSource source(kernel, facts, source_options, note);
  PTSCOPE_ASSIGN_OR_RETURN(SessionSummary summary, RunSession(session, source));
  (void)summary;
  PTSCOPE_ASSIGN_OR_RETURN(format::Archive archive, format::ReadArchive(options.output));
  // One stream per traced thread; the workload has one.
  std::map<uint32_t, std::vector<uint8_t>> streams;
  for (const format::PtDataChunk& piece : archive.pt_data) {
    std::vector<uint8_t>& stream = streams[piece.tid];
    if (piece.stream_offset != stream.size() || piece.bytes_lost_before != 0)
      return SelftestVerdict{false, "PT was lost before stream offset " +
                                        std::to_string(piece.stream_offset) + " of thread " +
                                        std::to_string(piece.tid)};
    stream.insert(stream.end(), piece.data.begin(), piece.data.end());
  }
  if (streams.size() != 1)
    return SelftestVerdict{false, std::to_string(streams.size()) +
                                      " PT streams in the archive, expected the workload's one"};
  return CheckSelftestTrace(streams.begin()->second, WorkloadLayout());
}

}  // namespace ptscope::record
