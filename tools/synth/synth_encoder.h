// Intel PT packets for a walk that is told about control flow one block at a time, written with
// libipt's encoder (pt_enc_next) under the rules of reference/intel-pt.md §1(a) and §7: PSB+ with
// TSC/TMA/CBR/MODE.Exec/FUP/PSBEND every psb_period bytes; TNT bits oldest-first, at most 6 in a
// TNT-8 and 47 in a TNT-64, flushed before every TIP/FUP/PSB/TIP.PGD; manual IP compression with
// last-IP reset at every PSB; return compression against a 64-entry ring cleared at every PSB;
// MTC at every crystal-clock edge and CYC before packets under a clock of one cycle = one TSC
// tick = one instruction (pt-emulate's virtual clock).
#pragma once

#include <cstddef>
#include <cstdint>

struct pt_encoder;

namespace ptscope::synth {

enum class Timing : uint8_t { kNone, kTsc, kMtc, kCyc };  // each includes the ones before it

struct EncoderOptions {
  Timing timing = Timing::kCyc;
  uint32_t mtc_freq = 3;          // MTC every 2^mtc_freq crystal-clock ticks
  uint32_t tsc_per_ctc = 64;      // cpuid 0x15 ebx/eax with eax = 1 (TMA.fc is 9 bits: < 512)
  uint8_t cbr = 10;               // = max_nonturbo_ratio: one cycle per TSC tick
  uint64_t psb_period = 4096;     // bytes between PSB+
  bool return_compression = true;
};

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void Append(const uint8_t* bytes, size_t size) = 0;
};

struct EncoderStats {
  uint64_t packets = 0, bytes = 0, psbs = 0, compressed_returns = 0, tips = 0, tnt_bits = 0;
};

class SynthEncoder {
 public:
  SynthEncoder(const EncoderOptions& options, ByteSink* sink);
  ~SynthEncoder();
  SynthEncoder(const SynthEncoder&) = delete;
  SynthEncoder& operator=(const SynthEncoder&) = delete;

  // All `tsc` arguments are the virtual clock when the instruction in question starts; they
  // never decrease.

  // Tracing starts (or resumes) at `ip`: [PSB+ when due], MODE.Exec, TIP.PGE.
  void Enable(uint64_t ip, uint64_t tsc);
  // At an instruction boundary while enabled: PSB+ with FUP(next_ip) when psb_period is due.
  void MaybePsb(uint64_t next_ip, uint64_t tsc) {
    if (bytes_since_psb_ >= options_.psb_period) Psb(next_ip, true, tsc);
  }
  void CondBranch(bool taken, uint64_t tsc);
  // A call (direct or indirect) whose return address is `return_ip`; zero-length calls
  // (`call next`) are not remembered for return compression.
  void Call(uint64_t return_ip, bool zero_length) {
    if (!zero_length) PushReturn(return_ip);
  }
  void IndirectBranch(uint64_t target, uint64_t tsc);  // TIP
  void Return(uint64_t target, uint64_t tsc);          // TNT bit or TIP
  // Tracing stops after the branch at `tsc`: TIP.PGD(target), or with the IP suppressed for a
  // syscall (binds to the far transfer).
  void Disable(uint64_t target, bool suppress_ip, uint64_t tsc);
  void Flush() { FlushTnt(); }

  const EncoderStats& stats() const { return stats_; }

 private:
  void AdvanceTo(uint64_t tsc);
  void Psb(uint64_t ip, bool with_fup, uint64_t tsc);
  void TimeSync(uint64_t tsc);
  void CycTo(uint64_t tsc);
  void Mtc(uint64_t edge);
  void Ip(int type, uint64_t ip, bool suppressed);
  void ModeExec();
  void AddTnt(bool taken, uint64_t tsc);
  void FlushTnt();
  void PushReturn(uint64_t ip);
  void Emit(const void* packet);

  EncoderOptions options_;
  ByteSink* sink_;
  pt_encoder* encoder_ = nullptr;
  uint8_t scratch_[32] = {};
  EncoderStats stats_;
  bool started_ = false;
  uint64_t bytes_since_psb_ = 0;
  uint64_t last_ip_ = 0;
  bool have_last_ip_ = false;
  uint64_t tnt_payload_ = 0;
  uint32_t tnt_bits_ = 0;
  uint64_t tnt_first_tsc_ = 0;
  static constexpr uint32_t kRetRing = 64;
  uint64_t ret_ring_[kRetRing] = {};
  uint32_t ret_top_ = 0, ret_count_ = 0;
  uint64_t cyc_ref_ = 0;    // the time a decoder gives the last timing packet
  uint64_t next_mtc_ = 0;   // the next crystal-clock edge that yields an MTC
  uint64_t mtc_period_ = 0;
};

}  // namespace ptscope::synth
