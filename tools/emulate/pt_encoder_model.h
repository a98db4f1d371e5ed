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

struct pt_encoder;

namespace ptscope::emulate {

// What kind of control flow an instruction has, as far as PT is concerned.
enum class InsnClass : uint8_t {
  kOther,         // no branch: next ip is the fall-through
  kCondBranch,    // jcc/loop/jrcxz: one TNT bit
  kJump,          // direct near jmp: no packet
  kCall,          // direct near call: no packet, pushed for return compression
  kIndirectJump,  // TIP
  kIndirectCall,  // TIP, pushed for return compression
  kReturn,        // near ret: compressed (TNT bit) or TIP
  kSyscall,       // syscall/sysenter/int n/far transfers: leaves the traced (user) region
};

enum class TimingMode : uint8_t { kNone, kTsc, kMtc, kCyc };

struct EncoderConfig {
  TimingMode timing = TimingMode::kCyc;
  uint32_t mtc_freq = 3;           // MTC every 2^mtc_freq crystal clock ticks
  uint64_t psb_period = 4096;      // bytes of packets between PSB+
  bool return_compression = true;
  uint32_t tsc_per_ctc = 64;       // cpuid 0x15 ebx/eax (eax = 1); at most 511 (TMA.fc is 9 bits)
  uint8_t cbr = 10;                // core:bus ratio, equal to max_nonturbo_ratio (1 cycle = 1 tick)
};

// Receives the packet bytes of one stream.
class PtPacketSink {
 public:
  virtual ~PtPacketSink() = default;
  virtual void Append(const uint8_t* bytes, size_t size) = 0;
  // Called right before the bytes of a PSB packet are appended (snapshot rings cut here).
  virtual void MarkPsb() = 0;
};

struct RetiredInsn {
  uint64_t ip = 0;
  uint64_t fallthrough = 0;  // ip + size
  uint64_t next_ip = 0;      // where execution actually continued
  InsnClass cls = InsnClass::kOther;
};

struct EncoderStats {
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t psbs = 0;
  uint64_t compressed_returns = 0;
};

class PtEncoderModel {
 public:
  // `sink` must outlive the model. Aborts (PTSCOPE_CHECK) only if libipt cannot allocate.
  PtEncoderModel(const EncoderConfig& config, PtPacketSink* sink);
  ~PtEncoderModel();
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
  void FlushPending();

  bool enabled() const { return enabled_; }
  const EncoderStats& stats() const { return stats_; }

 private:
  void AdvanceTo(uint64_t tsc);
  void EmitEnable(uint64_t ip, uint64_t tsc);
  void EmitPsb(uint64_t ip, bool with_fup, uint64_t tsc);
  void EmitTimeSync(uint64_t tsc);  // TSC (+TMA when MTC is on)
  void EmitCycTo(uint64_t tsc);
  void EmitMtc(uint64_t edge);
  void EmitIp(int type, uint64_t ip, bool suppressed);
  void EmitModeExec();
  void AddTnt(bool taken, uint64_t tsc);
  void FlushTnt();
  void PushReturn(uint64_t address);
  void Emit(const void* packet);  // a struct pt_packet

  EncoderConfig config_;
  PtPacketSink* sink_;
  pt_encoder* encoder_ = nullptr;
  uint8_t scratch_[64] = {};
  EncoderStats stats_;

  bool enabled_ = false;
  bool started_ = false;            // the first PSB+ was written
  uint64_t bytes_since_psb_ = 0;

  uint64_t last_ip_ = 0;            // IP compression state, reset at PSB
  bool have_last_ip_ = false;

  uint64_t tnt_payload_ = 0;        // oldest branch in the most significant bit
  uint8_t tnt_bits_ = 0;
  uint64_t tnt_first_tsc_ = 0;      // time of the oldest pending branch (its CYC)

  static constexpr int kRetStackSize = 64;
  uint64_t ret_stack_[kRetStackSize] = {};
  int ret_top_ = 0;                 // ring index of the next push
  int ret_count_ = 0;

  uint64_t now_ = 0;                // last time the model saw
  uint64_t cyc_ref_ = 0;            // the time a decoder attributes to the last timing packet
  uint64_t next_mtc_ = 0;           // time of the next CTC edge that yields an MTC
};

}  // namespace ptscope::emulate
