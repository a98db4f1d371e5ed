// The random walk of one thread over a CodeGraph, reported block by block to a PtPacketEncoder
// (tools/ptgen; and, optionally, instruction by instruction to a ground-truth file).
//
// Conditional branches go either way (a backward branch, usually a loop's back edge, is taken 7
// times in 8); direct calls push the return address on a shadow call stack and returns pop it;
// indirect jumps and calls land on a random function entry (TIP), except that a jump through the
// GOT (PLT stub) is a call into an untraced library that returns (TIP.PGD, then TIP.PGE at the
// return address); a syscall is TIP.PGD, then
// TIP.PGE at the next instruction. A return with an empty shadow stack returns to untraced code
// (TIP.PGD with that address) and the walk resumes at a random function entry (TIP.PGE), as does a
// branch into a dead block (int3, ud2, undecodable bytes). The walk ends at the first return,
// indirect branch or syscall after the requested instruction count, with TIP.PGD there.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "code_graph.h"
#include "ground_truth.h"
#include "pt_packet_encoder.h"
#include "ptscope/result.h"

namespace ptscope::synth {

// The ground truth (tools/ptgen): one `TID 0xADDRESS` line per walked instruction.
using GroundTruthWriter = ptgen::GroundTruthWriter;

// One TIP.PGD of a walk: where it left the traced code. The call-tree oracle needs it (the ground
// truth lists only traced instructions, so a return into untraced code and the entry of the code
// tracing resumes at look like one transfer there).
struct UntracedExit {
  uint32_t tid = 0;
  uint64_t instructions = 0;  // the thread's instructions so far: the last is the branch that left
  uint64_t target = 0;        // TIP.PGD's address; 0: suppressed (a syscall)
};

// Per-CPU captures (pt-synth --cpus): which CPU's stream a thread's packets go to, and when it
// runs there. The walk asks before its first instruction and after every TIP.PGD it resumes
// from (a syscall, a library call, a restart: the thread may leave its CPU meanwhile, and come
// back on whichever CPU is free); it says when each TIP.PGD, and its last, happened. Only one
// walk runs at a time (see SynthCpus).
class CpuPlacement {
 public:
  virtual ~CpuPlacement() = default;
  // The thread can run user code from `ready_tsc` on: the encoder of the CPU it runs on, with
  // `*start_tsc` (>= ready_tsc) set to when it starts there.
  virtual ptgen::PtPacketEncoder* Run(uint64_t ready_tsc, uint64_t* start_tsc) = 0;
  // It left the traced code (exited: for good) at `tsc`, with TIP.PGD.
  virtual void Left(uint64_t tsc, bool exited) = 0;
};

struct WalkOptions {
  uint64_t instructions = 0;  // at least this many (the walk ends at the next ret/indirect/syscall)
  uint64_t seed = 1;
  uint32_t tid = 0;
  uint64_t start_tsc = 0;
  uint64_t untraced_ticks = 200;  // virtual time spent outside the trace (syscalls, untraced code)
  std::vector<UntracedExit>* exits = nullptr;  // not null: every TIP.PGD is appended here
  CpuPlacement* placement = nullptr;  // not null: per-CPU streams; Walk's encoder is not used
};

struct WalkStats {
  uint64_t instructions = 0;
  uint64_t blocks = 0;
  uint64_t calls = 0;
  uint64_t returns = 0;
  uint64_t syscalls = 0;
  uint64_t library_calls = 0;  // PLT jumps: untraced code that returned to the caller
  uint64_t restarts = 0;    // TIP.PGD to untraced code, then TIP.PGE at a new function
  uint64_t max_depth = 0;
  uint64_t end_tsc = 0;
};

// Fails only when the binary has no function entry a walk can start at.
Result<WalkStats> Walk(CodeGraph& graph, ptgen::PtPacketEncoder& encoder,
                       const WalkOptions& options, GroundTruthWriter* truth);

}  // namespace ptscope::synth
