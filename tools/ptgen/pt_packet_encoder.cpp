#include "pt_packet_encoder.h"

#include <intel-pt.h>

#include "ptscope/result.h"

namespace ptscope::ptgen {
namespace {

bool FitsSext48(uint64_t ip) {
  const uint64_t top = ip >> 47;
  return top == 0 || top == (~uint64_t{0} >> 47);
}

}  // namespace

PtPacketEncoder::PtPacketEncoder(const EncoderConfig& config, PacketSink* sink)
    : config_(config), sink_(sink) {
  pt_config pt{};
  pt_config_init(&pt);
  pt.begin = scratch_;
  pt.end = scratch_ + sizeof scratch_;
  encoder_ = pt_alloc_encoder(&pt);
  PTSCOPE_CHECK(encoder_ != nullptr);
  PTSCOPE_CHECK(config_.tsc_per_ctc > 0 && config_.tsc_per_ctc < 512);
  mtc_period_ = uint64_t{config_.tsc_per_ctc} << config_.mtc_freq;
}

PtPacketEncoder::~PtPacketEncoder() { pt_free_encoder(encoder_); }

void PtPacketEncoder::Emit(const void* packet) {
  pt_enc_sync_set(encoder_, 0);
  const int size = pt_enc_next(encoder_, static_cast<const pt_packet*>(packet));
  PTSCOPE_CHECK(size > 0);  // every packet built here is valid by construction
  sink_->Append(scratch_, static_cast<size_t>(size));
  bytes_since_psb_ += static_cast<uint64_t>(size);
  stats_.bytes += static_cast<uint64_t>(size);
  ++stats_.packets;
}

void PtPacketEncoder::AdvanceTo(uint64_t tsc) {
  if (!started_ || config_.timing < Timing::kMtc || tsc < next_mtc_) return;
  const uint64_t last_edge = tsc / mtc_period_ * mtc_period_;
  const uint64_t max_step = mtc_period_ * 128;
  FlushTnt();  // pending TNT bits are older than the edge
  uint64_t known = next_mtc_ - mtc_period_;  // the last edge a decoder has (MTC, or TMA's CTC)
  while (last_edge - known > max_step) {
    known += max_step;
    Mtc(known);
  }
  Mtc(last_edge);
  next_mtc_ = last_edge + mtc_period_;
}

void PtPacketEncoder::Mtc(uint64_t edge) {
  // A CYC right at the edge: then "cycles since the last CYC" (hardware) and "cycles since the
  // last MTC" (what libipt's and perf's decoders assume after an MTC) are the same number.
  CycTo(edge);
  pt_packet mtc{};
  mtc.type = ppt_mtc;
  mtc.payload.mtc.ctc = static_cast<uint8_t>((edge / config_.tsc_per_ctc) >> config_.mtc_freq);
  Emit(&mtc);
  cyc_ref_ = edge;
}

void PtPacketEncoder::TimeSync(uint64_t tsc) {
  if (config_.timing == Timing::kNone) return;
  pt_packet packet{};
  packet.type = ppt_tsc;
  packet.payload.tsc.tsc = tsc & ((uint64_t{1} << 56) - 1);
  Emit(&packet);
  cyc_ref_ = tsc;
  if (config_.timing < Timing::kMtc) return;
  pt_packet tma{};
  tma.type = ppt_tma;
  tma.payload.tma.ctc = static_cast<uint16_t>((tsc / config_.tsc_per_ctc) & 0xffff);
  tma.payload.tma.fc = static_cast<uint16_t>(tsc % config_.tsc_per_ctc);
  Emit(&tma);
  next_mtc_ = (tsc / mtc_period_ + 1) * mtc_period_;
}

void PtPacketEncoder::CycTo(uint64_t tsc) {
  if (config_.timing != Timing::kCyc || tsc <= cyc_ref_) return;
  pt_packet cyc{};
  cyc.type = ppt_cyc;
  cyc.payload.cyc.value = tsc - cyc_ref_;
  Emit(&cyc);
  cyc_ref_ = tsc;
}

void PtPacketEncoder::ModeExec() {
  pt_packet mode{};
  mode.type = ppt_mode;
  mode.payload.mode.leaf = pt_mol_exec;
  mode.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
  Emit(&mode);
}

void PtPacketEncoder::Ip(int type, uint64_t ip, bool suppressed) {
  pt_packet packet{};
  packet.type = static_cast<pt_packet_type>(type);
  if (suppressed) {
    packet.payload.ip.ipc = pt_ipc_suppressed;  // last-IP stays as it is
  } else {
    if (have_last_ip_ && (ip >> 16) == (last_ip_ >> 16)) {
      packet.payload.ip.ipc = pt_ipc_update_16;
      packet.payload.ip.ip = ip & 0xffff;
    } else if (have_last_ip_ && (ip >> 32) == (last_ip_ >> 32)) {
      packet.payload.ip.ipc = pt_ipc_update_32;
      packet.payload.ip.ip = ip & 0xffffffff;
    } else if (FitsSext48(ip)) {
      packet.payload.ip.ipc = pt_ipc_sext_48;
      packet.payload.ip.ip = ip & 0xffffffffffff;
    } else {
      packet.payload.ip.ipc = pt_ipc_full;
      packet.payload.ip.ip = ip;
    }
    last_ip_ = ip;
    have_last_ip_ = true;
  }
  Emit(&packet);
}

void PtPacketEncoder::Psb(uint64_t ip, bool with_fup, uint64_t tsc) {
  FlushTnt();
  if (started_) CycTo(tsc);  // keeps the CYC sum between two MTCs equal to their distance
  sink_->MarkPsb();
  bytes_since_psb_ = 0;
  ++stats_.psbs;
  started_ = true;
  pt_packet psb{};
  psb.type = ppt_psb;
  Emit(&psb);
  TimeSync(tsc);
  Cbr();
  ModeExec();
  // A decoder may start here: no last-IP and no return-compression history survive a PSB.
  have_last_ip_ = false;
  last_ip_ = 0;
  ret_count_ = 0;
  if (with_fup) Ip(ppt_fup, ip, false);
  pt_packet end{};
  end.type = ppt_psbend;
  Emit(&end);
}

void PtPacketEncoder::Cbr() {
  pt_packet cbr{};
  cbr.type = ppt_cbr;
  cbr.payload.cbr.ratio = config_.cbr;
  Emit(&cbr);
}

void PtPacketEncoder::Enable(uint64_t ip, uint64_t tsc) {
  if (started_ && config_.time_after_gap && config_.timing != Timing::kNone &&
      tsc - cyc_ref_ > mtc_period_ * 128) {
    // Real time passed while tracing was off (cyc_ref_: the time of the last timing packet).
    // The TSC outside PSB+ is not used for calibration by libipt, and a CBR outside PSB+ restarts
    // it, so the next MTC is not compared with one from before the gap (their CTC payloads
    // wrapped many times). No CYC for the gap: no cycles ran in this thread.
    FlushTnt();
    TimeSync(tsc);
    Cbr();
  } else {
    AdvanceTo(tsc);
  }
  if (!started_ || bytes_since_psb_ >= config_.psb_period) Psb(0, false, tsc);
  CycTo(tsc);
  ModeExec();
  Ip(ppt_tip_pge, ip, false);
}

void PtPacketEncoder::CondBranch(bool taken, uint64_t tsc) {
  AdvanceTo(tsc);
  AddTnt(taken, tsc);
}

void PtPacketEncoder::AddTnt(bool taken, uint64_t tsc) {
  if (tnt_bits_ == 0) tnt_first_tsc_ = tsc;
  tnt_payload_ = (tnt_payload_ << 1) | (taken ? 1 : 0);
  ++stats_.tnt_bits;
  if (++tnt_bits_ == 47) FlushTnt();
}

void PtPacketEncoder::FlushTnt() {
  if (tnt_bits_ == 0) return;
  CycTo(tnt_first_tsc_);
  pt_packet packet{};
  packet.type = tnt_bits_ <= 6 ? ppt_tnt_8 : ppt_tnt_64;
  packet.payload.tnt.bit_size = static_cast<uint8_t>(tnt_bits_);
  packet.payload.tnt.payload = tnt_payload_;
  Emit(&packet);
  tnt_bits_ = 0;
  tnt_payload_ = 0;
}

void PtPacketEncoder::PushReturn(uint64_t ip) {
  ret_ring_[ret_top_] = ip;
  ret_top_ = (ret_top_ + 1) % kRetRing;
  if (ret_count_ < kRetRing) ++ret_count_;  // else the oldest entry was overwritten
}

void PtPacketEncoder::IndirectBranch(uint64_t target, uint64_t tsc) {
  AdvanceTo(tsc);
  FlushTnt();
  CycTo(tsc);
  Ip(ppt_tip, target, false);
  ++stats_.tips;
}

void PtPacketEncoder::Return(uint64_t target, uint64_t tsc) {
  const uint32_t top = (ret_top_ + kRetRing - 1) % kRetRing;
  if (config_.return_compression && ret_count_ > 0 && ret_ring_[top] == target) {
    AdvanceTo(tsc);
    ret_top_ = top;
    --ret_count_;
    ++stats_.compressed_returns;
    AddTnt(true, tsc);
    return;
  }
  IndirectBranch(target, tsc);  // the flush first: a pending bit would read as a compressed ret
  // Decoders disagree on what an uncompressed return does to their return stack: perf pops it on
  // every RET, libipt only on compressed ones. Forgetting every pending call makes later returns
  // uncompressed until new calls arrive, which both decode identically (a signal handler
  // returning to __restore_rt showed the difference).
  ret_count_ = 0;
}

void PtPacketEncoder::Disable(uint64_t target, bool suppress_ip, uint64_t tsc) {
  AdvanceTo(tsc);
  FlushTnt();
  CycTo(tsc);
  Ip(ppt_tip_pgd, target, suppress_ip);
}

void PtPacketEncoder::DisableAt(uint64_t ip, uint64_t tsc) {
  AdvanceTo(tsc);
  FlushTnt();
  CycTo(tsc);
  Ip(ppt_fup, ip, false);
  Ip(ppt_tip_pgd, 0, true);
}

void PtPacketEncoder::AsyncBranch(uint64_t from, uint64_t to, uint64_t tsc) {
  AdvanceTo(tsc);
  FlushTnt();
  CycTo(tsc);
  Ip(ppt_fup, from, false);
  Ip(ppt_tip, to, false);
}

}  // namespace ptscope::ptgen
