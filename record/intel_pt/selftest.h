// pt-record --selftest: the first command on a new Intel PT host. pt-record runs a known program
// (itself, re-executed into ptscope_selftest_workload: a loop of kSelftestCalls iterations, each
// calling a leaf function once, then exit_group), records it through the ordinary session with
// an address filter on that code and return compression off, reads the archive back and checks
// the PT against the control flow the code must have: a TIP.PGE at the workload's entry, then
// per iteration one TIP to the call's return site and one conditional branch, taken every time
// but the last. Interrupts may pause the trace (FUP, TIP.PGD, TIP.PGE inside the workload)
// without changing the verdict; an overflow, a lost piece, any other TIP or a branch out of
// turn fails it, saying which event differed.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "host_info.h"
#include "perf_kernel.h"
#include "ptscope/result.h"

namespace ptscope::record {

inline constexpr uint32_t kSelftestCalls = 10000;
// Instructions per iteration (call, ret, dec, jnz), and around the loop (mov before; mov, xor,
// syscall after).
inline constexpr uint64_t kSelftestInstructions = 4ull * kSelftestCalls + 4;

// The hidden argument that makes pt-record run the workload (never returns: exit_group(0)).
inline constexpr const char* kSelftestWorkloadArg = "--selftest-workload";
[[noreturn]] void RunSelftestWorkload();

// Where the workload's code is, relative to its entry (the same in every binary that links it).
struct SelftestLayout {
  uint64_t size = 0;               // the symbol's extent, which the address filter covers
  uint64_t return_site = 0;        // the instruction after the call to the leaf
};
SelftestLayout WorkloadLayout();

struct SelftestVerdict {
  bool pass = false;
  std::string detail;  // what was seen, or the first difference
};

// Checks one thread's PT bytes (in stream order) against the workload's control flow.
SelftestVerdict CheckSelftestTrace(std::span<const uint8_t> pt, const SelftestLayout& layout);

struct SelftestOptions {
  std::vector<std::string> workload_argv;  // runs RunSelftestWorkload
  std::string workload_file;               // the ELF file holding ptscope_selftest_workload
  std::string output;                      // the archive, kept for a bug report
  bool drop_privileges = true;
  std::string tool_version;
};

// Records the workload through the session with the kernel's PT source and checks the archive.
// An error: the capture itself failed (no verdict).
Result<SelftestVerdict> RunSelftest(PerfKernel& kernel, const HostFacts& facts,
                                    const SelftestOptions& options,
                                    std::function<void(const std::string&)> note);

}  // namespace ptscope::record
