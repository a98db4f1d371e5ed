#include "synth_encoder.h"

#include <intel-pt.h>

#include "ptscope/result.h"

namespace ptscope::synth {
namespace {

bool FitsSext48(uint64_t ip) {
  const uint64_t top = ip >> 47;
  return top == 0 || top == (~uint64_t{0} >> 47);
}

}  // namespace

SynthEncoder::SynthEncoder(const EncoderOptions& options, ByteSink* sink)
    : options_(options), sink_(sink) {
  pt_config config;
  pt_config_init(&config);
  config.begin = scratch_;
  config.end = scratch_ + sizeof scratch_;
  encoder_ = pt_alloc_encoder(&config);
  PTSCOPE_CHECK(encoder_ != nullptr);
  PTSCOPE_CHECK(options_.tsc_per_ctc > 0 && options_.tsc_per_ctc < 512);
  mtc_period_ = uint64_t{options_.tsc_per_ctc} << options_.mtc_freq;
}

SynthEncoder::~SynthEncoder() { pt_free_encoder(encoder_); }

void SynthEncoder::Emit(const void* packet) {
  pt_enc_sync_set(encoder_, 0);
  const int size = pt_enc_next(encoder_, static_cast<const pt_packet*>(packet));
  PTSCOPE_CHECK(size > 0);  // every packet built here is valid by construction
  sink_->Append(scratch_, static_cast<size_t>(size));
  bytes_since_psb_ += static_cast<uint64_t>(size);
  stats_.bytes += static_cast<uint64_t>(size);
  ++stats_.packets;
}

// An MTC for every crystal-clock edge passed since the last event, each preceded by a CYC right
// at the edge, so that the CYCs between two MTCs add up to exactly one MTC period (libipt
// calibrates CYC from that). Pending TNT bits are older than the edge and go out first.
void SynthEncoder::AdvanceTo(uint64_t tsc) {
  if (!started_ || options_.timing < Timing::kMtc || tsc < next_mtc_) return;
  FlushTnt();
  for (; next_mtc_ <= tsc; next_mtc_ += mtc_period_) Mtc(next_mtc_);
}

void SynthEncoder::Mtc(uint64_t edge) {
  CycTo(edge);
  pt_packet mtc{};
  mtc.type = ppt_mtc;
  mtc.payload.mtc.ctc = static_cast<uint8_t>((edge / options_.tsc_per_ctc) >> options_.mtc_freq);
  Emit(&mtc);
  cyc_ref_ = edge;
}

void SynthEncoder::TimeSync(uint64_t tsc) {
  if (options_.timing == Timing::kNone) return;
  pt_packet packet{};
  packet.type = ppt_tsc;
  packet.payload.tsc.tsc = tsc & ((uint64_t{1} << 56) - 1);
  Emit(&packet);
  cyc_ref_ = tsc;
  if (options_.timing < Timing::kMtc) return;
  pt_packet tma{};
  tma.type = ppt_tma;
  tma.payload.tma.ctc = static_cast<uint16_t>((tsc / options_.tsc_per_ctc) & 0xffff);
  tma.payload.tma.fc = static_cast<uint16_t>(tsc % options_.tsc_per_ctc);
  Emit(&tma);
  next_mtc_ = (tsc / mtc_period_ + 1) * mtc_period_;
}

void SynthEncoder::CycTo(uint64_t tsc) {
  if (options_.timing != Timing::kCyc || tsc <= cyc_ref_) return;
  pt_packet cyc{};
  cyc.type = ppt_cyc;
  cyc.payload.cyc.value = tsc - cyc_ref_;
  Emit(&cyc);
  cyc_ref_ = tsc;
}

void SynthEncoder::ModeExec() {
  pt_packet mode{};
  mode.type = ppt_mode;
  mode.payload.mode.leaf = pt_mol_exec;
  mode.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
  Emit(&mode);
}

void SynthEncoder::Ip(int type, uint64_t ip, bool suppressed) {
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

void SynthEncoder::Psb(uint64_t ip, bool with_fup, uint64_t tsc) {
  FlushTnt();
  if (started_) CycTo(tsc);
  bytes_since_psb_ = 0;
  ++stats_.psbs;
  started_ = true;
  pt_packet psb{};
  psb.type = ppt_psb;
  Emit(&psb);
  TimeSync(tsc);
  pt_packet cbr{};
  cbr.type = ppt_cbr;
  cbr.payload.cbr.ratio = options_.cbr;
  Emit(&cbr);
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

void SynthEncoder::Enable(uint64_t ip, uint64_t tsc) {
  AdvanceTo(tsc);
  if (!started_ || bytes_since_psb_ >= options_.psb_period) Psb(0, false, tsc);
  CycTo(tsc);
  ModeExec();
  Ip(ppt_tip_pge, ip, false);
}

void SynthEncoder::CondBranch(bool taken, uint64_t tsc) {
  AdvanceTo(tsc);
  AddTnt(taken, tsc);
}

void SynthEncoder::AddTnt(bool taken, uint64_t tsc) {
  if (tnt_bits_ == 0) tnt_first_tsc_ = tsc;
  tnt_payload_ = (tnt_payload_ << 1) | (taken ? 1 : 0);
  ++stats_.tnt_bits;
  if (++tnt_bits_ == 47) FlushTnt();
}

void SynthEncoder::FlushTnt() {
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

void SynthEncoder::PushReturn(uint64_t ip) {
  ret_ring_[ret_top_] = ip;
  ret_top_ = (ret_top_ + 1) % kRetRing;
  if (ret_count_ < kRetRing) ++ret_count_;  // else the oldest entry was overwritten
}

void SynthEncoder::IndirectBranch(uint64_t target, uint64_t tsc) {
  AdvanceTo(tsc);
  FlushTnt();
  CycTo(tsc);
  Ip(ppt_tip, target, false);
  ++stats_.tips;
}

void SynthEncoder::Return(uint64_t target, uint64_t tsc) {
  const uint32_t top = (ret_top_ + kRetRing - 1) % kRetRing;
  if (options_.return_compression && ret_count_ > 0 && ret_ring_[top] == target) {
    AdvanceTo(tsc);
    ret_top_ = top;
    --ret_count_;
    ++stats_.compressed_returns;
    AddTnt(true, tsc);
    return;
  }
  IndirectBranch(target, tsc);  // the flush first: a pending bit would read as a compressed ret
  // perf pops its return stack on every RET, libipt only on compressed ones: forgetting the
  // pending calls keeps later returns explicit until new calls come, which both decode alike.
  ret_count_ = 0;
}

void SynthEncoder::Disable(uint64_t target, bool suppress_ip, uint64_t tsc) {
  AdvanceTo(tsc);
  FlushTnt();
  CycTo(tsc);
  Ip(ppt_tip_pgd, target, suppress_ip);
}

}  // namespace ptscope::synth
