// Genuine Intel PT packets for generated traces, written with libipt's encoder (pt_enc_next): the
// packet layer pt-emulate (which learns control flow one retired instruction at a time) and
// pt-synth (one walked block at a time) share. The rules are those of reference/intel-pt.md §1(a)
// and §7, for a PT unit configured for user-only branch tracing:
//  - PSB+ (PSB, TSC, TMA, CBR, MODE.Exec, [FUP], PSBEND) every psb_period bytes; a decoder may
//    start there, so no last-IP and no return-compression history survive it;
//  - TNT bits oldest-first, at most 6 in a TNT-8 and 47 in a TNT-64, flushed before every
//    TIP/FUP/PSB/TIP.PGD and before an MTC;
//  - manual IP compression against the last IP;
//  - return compression against a 64-entry ring of call return addresses;
//  - timing under a virtual clock where one instruction = one cycle = one TSC tick: CYC before
//    packets, an MTC at the last crystal-clock edge crossed (and at every 128th edge in between,
//    since decoders correct a single 8-bit wrap of its payload), each with a CYC right at the
//    edge so that the CYCs between two MTCs sum to exactly their distance (libipt calibrates CYC
//    from that).
// All `tsc` arguments are the virtual clock when the instruction in question starts; they never
// decrease.
#pragma once

#include <cstddef>
#include <cstdint>

struct pt_encoder;

namespace ptscope::ptgen {

enum class Timing : uint8_t { kNone, kTsc, kMtc, kCyc };  // each includes the ones before it

struct EncoderConfig {
  Timing timing = Timing::kCyc;
  uint32_t mtc_freq = 3;          // MTC every 2^mtc_freq crystal-clock ticks
  uint32_t tsc_per_ctc = 64;      // cpuid 0x15 ebx/eax with eax = 1 (TMA.fc is 9 bits: < 512)
  uint8_t cbr = 10;               // = max_nonturbo_ratio: one cycle per TSC tick
  uint64_t psb_period = 4096;     // bytes between PSB+
  bool return_compression = true;
  // pt-emulate --clock real: time outside user code is real elapsed time, so the clock can jump
  // by seconds while tracing is off. Enable() then writes the new time at once, as a core does
  // after a sleep state (TSC, TMA, CBR before the TIP.PGE), where MTC catch-up would need a
  // packet every 128 crystal-clock periods. Off: streams stay byte for byte as before.
  bool time_after_gap = false;
};

// Receives the packet bytes of one stream.
class PacketSink {
 public:
  virtual ~PacketSink() = default;
  virtual void Append(const uint8_t* bytes, size_t size) = 0;
  // Called right before the bytes of a PSB packet are appended (snapshot rings cut there).
  virtual void MarkPsb() {}
};

struct EncoderStats {
  uint64_t packets = 0, bytes = 0, psbs = 0, compressed_returns = 0, tips = 0, tnt_bits = 0;
};

class PtPacketEncoder {
 public:
  // `sink` must outlive the encoder. Aborts (PTSCOPE_CHECK) only if libipt cannot allocate or
  // tsc_per_ctc is out of range.
  PtPacketEncoder(const EncoderConfig& config, PacketSink* sink);
  ~PtPacketEncoder();
  PtPacketEncoder(const PtPacketEncoder&) = delete;
  PtPacketEncoder& operator=(const PtPacketEncoder&) = delete;

  // Catches the stream's clock up to `tsc` (MTCs for crystal-clock edges crossed). Every method
  // below that takes a `tsc` does this first.
  void AdvanceTo(uint64_t tsc);
  // Tracing starts (or resumes) at `ip`: [PSB+ when due], MODE.Exec, TIP.PGE. With
  // time_after_gap and more than 128 MTC periods since the last timing packet: TSC, [TMA], CBR
  // first, instead of MTCs.
  void Enable(uint64_t ip, uint64_t tsc);
  // At an instruction boundary while enabled: PSB+ with FUP(next_ip) when psb_period is due.
  void MaybePsb(uint64_t next_ip, uint64_t tsc) {
    if (bytes_since_psb_ >= config_.psb_period) Psb(next_ip, true, tsc);
  }
  void CondBranch(bool taken, uint64_t tsc);
  // A call (direct or indirect) whose return address is `return_ip`; zero-length calls
  // (`call next`, a PIC idiom) are not remembered for return compression.
  void Call(uint64_t return_ip, bool zero_length) {
    if (!zero_length) PushReturn(return_ip);
  }
  void IndirectBranch(uint64_t target, uint64_t tsc);  // TIP
  void Return(uint64_t target, uint64_t tsc);          // TNT bit or TIP
  // Tracing stops after the branch at `tsc`: TIP.PGD(target), or with the IP suppressed for a
  // syscall (binds to the far transfer).
  void Disable(uint64_t target, bool suppress_ip, uint64_t tsc);
  // Tracing stops before the instruction at `ip` executes (detach, a thread killed): FUP(ip)
  // binds the disable there, then TIP.PGD; a bare TIP.PGD would bind to the next branch and a
  // decoder would run on past the last instruction that really retired.
  void DisableAt(uint64_t ip, uint64_t tsc);
  // An asynchronous transfer while enabled (signal delivery): FUP(from), TIP(to).
  void AsyncBranch(uint64_t from, uint64_t to, uint64_t tsc);
  // Writes pending TNT bits (before a snapshot copy, or at the end).
  void Flush() { FlushTnt(); }

  const EncoderStats& stats() const { return stats_; }

 private:
  void Psb(uint64_t ip, bool with_fup, uint64_t tsc);
  void TimeSync(uint64_t tsc);  // TSC (+TMA when MTC is on)
  void Cbr();
  void CycTo(uint64_t tsc);
  void Mtc(uint64_t edge);
  void Ip(int type, uint64_t ip, bool suppressed);
  void ModeExec();
  void AddTnt(bool taken, uint64_t tsc);
  void FlushTnt();
  void PushReturn(uint64_t ip);
  void Emit(const void* packet);  // a struct pt_packet

  EncoderConfig config_;
  PacketSink* sink_;
  pt_encoder* encoder_ = nullptr;
  uint8_t scratch_[64] = {};
  EncoderStats stats_;
  bool started_ = false;          // the first PSB+ was written
  uint64_t bytes_since_psb_ = 0;
  uint64_t last_ip_ = 0;          // IP compression state, reset at PSB
  bool have_last_ip_ = false;
  uint64_t tnt_payload_ = 0;      // oldest branch in the most significant bit
  uint32_t tnt_bits_ = 0;
  uint64_t tnt_first_tsc_ = 0;    // time of the oldest pending branch (its CYC)
  static constexpr uint32_t kRetRing = 64;
  uint64_t ret_ring_[kRetRing] = {};
  uint32_t ret_top_ = 0, ret_count_ = 0;  // ring index of the next push; entries held
  uint64_t cyc_ref_ = 0;          // the time a decoder gives the last timing packet
  uint64_t next_mtc_ = 0;         // the next crystal-clock edge that yields an MTC
  uint64_t mtc_period_ = 0;       // TSC ticks between MTC edges
};

}  // namespace ptscope::ptgen
