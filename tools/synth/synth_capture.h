// Writes a pt-synth capture: the same archive layout pt-emulate writes (metadata, one sideband
// attr, COMM/MMAP2/FORK/EXIT sideband, a ModuleChunk for the binary, per-thread PT streams in
// pieces, End), with the PT coming from random walks instead of a real execution.
#pragma once

#include <cstdint>
#include <string>

#include "pt_packet_encoder.h"
#include "ptscope/result.h"

namespace ptscope::synth {

struct SynthOptions {
  std::string output;
  std::string binary;
  uint64_t instructions = 0;  // in total, split evenly over the threads
  uint64_t seed = 1;
  uint32_t threads = 1;
  // 0: one PT stream per thread. N: per-CPU streams, the threads scheduled on N virtual CPUs
  // with context-switch sideband (synth_cpus.h); a thread leaves its CPU at its first TIP.PGD
  // (syscall, library call, restart) after `timeslice` ticks there (1 instruction = 1 tick).
  uint32_t cpus = 0;
  uint64_t timeslice = 20000;
  ptgen::EncoderConfig encoder;
  std::string ground_truth;   // empty: none
  // Empty: none. Else one `TID N 0xTARGET` line per TIP.PGD (N: the thread's instructions so far,
  // the last being the branch that left; TARGET 0: suppressed), for the call-tree oracle.
  std::string untraced_exits;
  uint64_t piece_size = 1u << 20;
  std::string command_line;   // recorded as metadata "command"
};

struct SynthSummary {
  uint64_t instructions = 0;
  uint64_t pt_bytes = 0;
  uint64_t psbs = 0;
  uint64_t calls = 0, returns = 0, compressed_returns = 0, syscalls = 0, restarts = 0;
  uint64_t blocks_decoded = 0;
  uint64_t max_depth = 0;
  uint64_t library_calls = 0;  // deepest shadow call stack
  uint64_t switch_ins = 0;     // per-CPU: times a thread was put on a CPU
  double seconds = 0;
};

Result<SynthSummary> WriteSynthCapture(const SynthOptions& options);

}  // namespace ptscope::synth
