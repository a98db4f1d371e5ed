// The "observed instruction stream → Intel PT packets" half of pt-emulate. It knows nothing about
// ptrace: the stepping loop (or a unit test) tells it which instruction retired, how it was
// classified and where execution continued, and it emits the packets a PT unit configured for
// user-only branch tracing would have produced (reference/intel-pt.md §1(a) and §7).
//
// One model per traced thread (per-thread streams, as perf's per-thread mode), or with --cpus
// one per virtual CPU, fed by whichever thread runs there (tracer_percpu.cpp). All times are
// virtual TSC ticks; the caller passes the clock value at which each event happens. Under
// pt-emulate's clock one core cycle equals one TSC tick, so CYC payloads are TSC deltas.
#pragma once

#include <cstddef>
#include <cstdint>

#include "insn_class.h"
#include "pt_packet_encoder.h"

namespace ptscope::emulate {

// What kind of control flow an instruction has (tools/ptgen, shared with pt-synth).
using InsnClass = ptgen::InsnClass;

// The packet layer is tools/ptgen's, shared with pt-synth.
using TimingMode = ptgen::Timing;
using EncoderConfig = ptgen::EncoderConfig;
using PtPacketSink = ptgen::PacketSink;
using EncoderStats = ptgen::EncoderStats;

struct RetiredInsn {
  uint64_t ip = 0;
  uint64_t fallthrough = 0;  // ip + size
  uint64_t next_ip = 0;      // where execution actually continued
  InsnClass cls = InsnClass::kOther;
};

class PtEncoderModel {
 public:
  // `sink` must outlive the model. Aborts (PTSCOPE_CHECK) only if libipt cannot allocate.
  PtEncoderModel(const EncoderConfig& config, PtPacketSink* sink) : encoder_(config, sink) {}
  PtEncoderModel(const PtEncoderModel&) = delete;
  PtEncoderModel& operator=(const PtEncoderModel&) = delete;

  // `insn` retired at virtual time `tsc` (the clock before it executed). Enables tracing at
  // insn.ip first when it is off (trace start, or after a syscall).
  void Retire(const RetiredInsn& insn, uint64_t tsc);
  // An asynchronous transfer (signal delivery): `from` is the ip of the instruction that did not
  // execute yet, `to` the handler. While tracing is off (e.g. right after a syscall) this is an
  // enable at `to`.
  void AsyncBranch(uint64_t from, uint64_t to, uint64_t tsc);
  // Tracing stops before the instruction at `ip` executes (detach, thread killed): FUP(ip) and
  // TIP.PGD. (Exits through a syscall are Retire() of that syscall instead.)
  void Disable(uint64_t ip, uint64_t tsc);
  // Writes pending TNT bits (before a snapshot copy, or at the end).
  void FlushPending() { encoder_.Flush(); }

  bool enabled() const { return enabled_; }
  const EncoderStats& stats() const { return encoder_.stats(); }

 private:
  ptgen::PtPacketEncoder encoder_;
  bool enabled_ = false;
};

}  // namespace ptscope::emulate
