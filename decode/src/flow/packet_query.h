// PacketQuery: libipt 2.0.5's query decoder (pt_qry_*) as QueryWalker uses it, with TNT bits taken
// inline: a branch whose bit is cached costs a shift and a test instead of a call into libipt.
//
// It gives the same answers as pt_qry_sync_forward/sync_set, cond_branch, indirect_branch, event,
// time, get_offset and get_sync_offset: return values and status flags, ips, events (fields and
// time) and trace offsets, including when a pending event shows (libipt reads ahead to the next
// TNT, TIP or event packet and binds FUP to the next TIP, MODE.Exec to the next TIP/TIP.PGE,
// PSB+ state to PSBEND). The lockstep test (ipt-block-loop --compare-query, tests/e2e/walker)
// checks it call for call against libipt.
//
// Modelled: PAD, PSB, PSBEND, TNT-8, TNT-64, TIP, TIP.PGE, TIP.PGD, FUP (asynchronous branches and
// disables), MODE.Exec, PIP, TSC, TMA, MTC, CYC, CBR, OVF (bound to the FUP after it, or alone
// when tracing resumed disabled), with libipt's time and calibration (pt_time/pt_tcal) and errata
// BDM70, SKD007 and SKZ84. Not modelled, refused: the OVF workarounds of errata SKD010, APL11 and
// APL12 where they would apply, MODE.TSX, VMCS, STOP, MNT, PTW, EXSTOP, MWAIT, PWRE, PWRX, unknown
// opcodes, and every decode error other than the end of the trace (damaged trace). A refusal is
// sticky: refused() turns true, every query answers kRefused from then on, and the caller decodes
// the same trace again with libipt.
#pragma once

#include <intel-pt.h>

#include <array>
#include <cstdint>

namespace ptscope::decode {

class PacketQuery {
 public:
  // Answered for input not modelled (negative, outside libipt's error codes).
  static constexpr int kRefused = -0x10000;

  explicit PacketQuery(const pt_config& config);

  int SyncForward(uint64_t* ip);
  int SyncSet(uint64_t* ip, uint64_t offset);
  // pt_qry_cond_branch: a cached bit inline, the next TNT packet through CondBranchSlow.
  [[gnu::always_inline]] int CondBranch(int* taken) {
    if (tnt_index_ > 1) [[likely]] {
      *taken = (tnt_bits_ & tnt_index_) != 0;
      tnt_index_ >>= 1;
      return 0;  // bits left: no status flags (see StatusFlags)
    }
    return CondBranchSlow(taken);
  }
  // CondBranch when a bit is cached (true): no packet decoded, so neither the offset nor the
  // time moved and the status is 0. False, with nothing done, when the cache is empty.
  [[gnu::always_inline]] bool CachedCondBranch(int* taken) {
    if (tnt_index_ <= 1) return false;
    *taken = (tnt_bits_ & tnt_index_) != 0;
    tnt_index_ >>= 1;
    return true;
  }
  // The TNT cache for a caller that takes several cached bits in a row, as CachedCondBranch would
  // one by one (QueryWalker::NextQuiet): the packet's bits and the next bit's mask (> 1: a bit is
  // cached); SetTntIndex stores the mask after the bits taken.
  uint64_t tnt_bits() const { return tnt_bits_; }
  uint64_t tnt_index() const { return tnt_index_; }
  void SetTntIndex(uint64_t index) { tnt_index_ = index; }
  int IndirectBranch(uint64_t* ip);
  int Event(pt_event* event);
  int Time(uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) const {  // (inline: per tick)
    if (refused_) return kRefused;
    *tsc = last_clock_.tsc;
    if (lost_mtc != nullptr) *lost_mtc = last_clock_.lost_mtc;
    if (lost_cyc != nullptr) *lost_cyc = last_clock_.lost_cyc;
    return last_clock_.have_tsc ? 0 : -pte_no_time;
  }
  int GetOffset(uint64_t* offset) const {
    if (pos_ == nullptr) return -pte_nosync;
    *offset = static_cast<uint64_t>(pos_ - begin_);
    return 0;
  }
  int GetSyncOffset(uint64_t* offset) const {
    if (sync_ == nullptr) return -pte_nosync;
    *offset = static_cast<uint64_t>(sync_ - begin_);
    return 0;
  }
  bool refused() const { return refused_; }
  // Also sets `*flag` when refused (now, if already): a flag its user tests for every block,
  // one load where refused() is two behind the walker's pointer.
  void NotifyRefusal(bool* flag) {
    notify_ = flag;
    if (refused_) *flag = true;
  }

 private:
  // The packet at pos_, as far as the query logic tells packets apart (libipt's decoder
  // functions). kNone: none fetched (the end of the trace or an error).
  enum class Kind : uint8_t {
    kNone, kPad, kPsb, kPsbend, kTnt8, kTnt64, kTip, kTipPge, kTipPgd, kFup, kMode, kTsc,
    kMtc, kCyc, kCbr, kTma, kPip, kOvf
  };
  // libipt's event bindings: events waiting for PSBEND, for a TIP (or TIP.PGE/PGD), for a FUP
  // (an overflow that resolved while tracing).
  enum Binding { kAtPsbend = 0, kAtTip = 1, kAtFup = 2, kBindings = 3 };
  // pt_time: the time at the current packet.
  struct Clock {
    uint64_t tsc = 0, base = 0, fc = 0;
    uint32_t ctc = 0, ctc_cyc = 0, lost_mtc = 0, lost_cyc = 0;
    uint8_t cbr = 0;
    bool have_tsc = false, have_cbr = false, have_tma = false, have_mtc = false;
  };
  // pt_time_cal: the cycles-to-fast-counter ratio, from CBR, TSC and MTC.
  struct Calibration {
    uint64_t fcr = 0, min_fcr = UINT64_MAX, max_fcr = 0, tsc = 0, cyc_tsc = 0, cyc_mtc = 0;
    uint32_t ctc = 0, lost_mtc = 0;
    bool have_mtc = false, check_skl168 = false;
  };
  static constexpr unsigned kQueueSlots = 8;  // libipt's evq_max (one slot stays free)
  struct Queue {
    pt_event events[kQueueSlots];
    uint8_t begin = 0, end = 0;
  };

  int Refuse() {
    refused_ = true;
    if (notify_ != nullptr) *notify_ = true;
    tnt_index_ = 0;  // (CondBranch's inline path answers nothing more)
    return kRefused;
  }
  void Reset();
  int Start(const uint8_t* pos, uint64_t* ip);
  int Fetch();  // sets next_ for the packet at pos_
  int FetchAt(const uint8_t* pos, Kind* kind) const;
  // FetchAt's look-up by a packet's first byte: its Kind, or kOpcodeExtended (0x02: the second
  // byte tells) or kOpcodeRefused (not modelled). One load instead of a chain of compares:
  // FetchAt runs for every packet.
  static constexpr uint8_t kOpcodeExtended = 0xfe, kOpcodeRefused = 0xff;
  static const std::array<uint8_t, 256> kOpcodeKinds;
  bool WillEvent() const;
  bool WillEos() const;
  int StatusFlags() const;
  int ReadAhead();
  int CondBranchSlow(int* taken);
  int CacheTnt();
  int Decode();        // next_, as between PSBs
  int DecodeHeader();  // next_, inside PSB+

  // Packets.
  int ReadIp(uint64_t* ip, int* ipc) const;  // size, or an error
  int DecodeIp();                            // updates the last ip; size, or an error
  int DecodeTnt();
  int DecodeTip();
  int DecodeTipPge();
  int DecodeTipPgd();
  int DecodeFup();
  int HeaderFup();
  int DecodeMode(bool header);
  int DecodePip(bool header);
  int DecodePsb();
  int DecodePsbend();
  int PsbendEvent();  // publishes a PSB+ event waiting for PSBEND (also at an OVF): 1, none 0
  int DecodeOvf();
  int OvfFupFollows(const uint8_t* pos) const;  // pt_pkt_find_ovf_fup, or kRefused
  // The size of a packet that libipt's scans after a FUP (BDM70) or an OVF skip, at `pos`: PAD,
  // TSC, CBR, TMA, MTC and CYC. 0: not one of those; -pte_eos: cut off; kRefused: bad.
  int SkippedPacketSize(Kind kind, const uint8_t* pos) const;
  int DecodeTsc(bool header);
  int DecodeCbr(bool header);
  int DecodeTma();
  int DecodeMtc();
  int DecodeCyc();
  int Bdm70TipPgeFollows(const uint8_t* pos) const;  // 1 when a TIP.PGE follows, 0 not

  // Time (pt_time and pt_tcal: errors other than the configuration's are returned), in
  // packet_query_time.cpp but for ApplyCyc. kFcrShift: the fixed-point shift of libipt's fcr.
  static constexpr unsigned kFcrShift = 8;
  int ApplyTsc(uint64_t tsc, bool header);
  int ApplyCbr(uint8_t ratio, bool header);
  int ApplyTma(uint16_t ctc, uint16_t fc);
  int ApplyMtc(uint8_t ctc);
  int ApplyCyc(uint64_t cyc);
  int CtcDelta(uint32_t ctc, uint32_t last_ctc, uint32_t* delta) const;
  int CtcToFc(uint64_t ctc, uint64_t* fc) const;
  void SetFcr(uint64_t fcr);
  bool HaveFcr() const { return calibration_.min_fcr <= calibration_.max_fcr; }

  // Events.
  pt_event* Standalone();
  pt_event* Enqueue(Binding binding);
  pt_event* Dequeue(Binding binding);
  bool Pending(Binding binding) const { return queues_[binding].begin != queues_[binding].end; }
  pt_event* Find(Binding binding, pt_event_type type);
  void EventTime(pt_event* event) const;
  void EventIp(uint64_t* ip, pt_event* event) const;
  int LastIp(uint64_t* ip) const;  // pt_last_ip_query

  const uint8_t* begin_;
  const uint8_t* end_;
  const uint8_t* pos_ = nullptr;
  const uint8_t* sync_ = nullptr;
  Kind next_ = Kind::kNone;
  uint8_t mtc_freq_;
  uint8_t nom_freq_;
  uint32_t cpuid15_eax_, cpuid15_ebx_;
  bool bdm70_, skd007_, skl168_, skz84_;
  bool skd010_, apl11_, apl12_;  // (their OVF workarounds: refused where they apply)
  bool refused_ = false;
  bool* notify_ = nullptr;  // (NotifyRefusal)
  bool enabled_ = false;
  bool consume_packet_ = false;
  // The last ip (pt_last_ip).
  uint64_t last_ip_ = 0;
  bool have_ip_ = false, ip_suppressed_ = false;
  // The TNT cache: the bits of the last TNT packet, the next one at tnt_index_ (0: empty).
  uint64_t tnt_bits_ = 0, tnt_index_ = 0;
  Clock clock_, last_clock_;
  Calibration calibration_;
  pt_event* event_ = nullptr;  // the event the last decode produced
  pt_event standalone_{};
  Queue queues_[kBindings];
};

// Inline: ApplyCyc (packet_query.cpp) and the clock (packet_query_time.cpp) both use them.
inline int PacketQuery::CtcDelta(uint32_t ctc, uint32_t last_ctc, uint32_t* delta) const {
  if (ctc < last_ctc) {
    ctc += 1u << (mtc_freq_ + 8);  // the counter wrapped
    if (ctc < last_ctc) return -pte_bad_packet;
  }
  *delta = ctc - last_ctc;
  return 0;
}

inline int PacketQuery::CtcToFc(uint64_t ctc, uint64_t* fc) const {
  if (cpuid15_eax_ == 0 || cpuid15_ebx_ == 0) return -pte_bad_config;
  *fc = (ctc * cpuid15_ebx_) / cpuid15_eax_;
  return 0;
}

}  // namespace ptscope::decode
