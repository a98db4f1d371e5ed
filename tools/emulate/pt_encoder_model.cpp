#include "pt_encoder_model.h"

#include <intel-pt.h>

#include "ptscope/result.h"

namespace ptscope::emulate {
namespace {

bool FitsSext48(uint64_t ip) {
  const uint64_t top = ip >> 47;
  return top == 0 || top == (~uint64_t{0} >> 47);
}

}  // namespace

PtEncoderModel::PtEncoderModel(const EncoderConfig& config, PtPacketSink* sink)
    : config_(config), sink_(sink) {
  pt_config pt{};
  pt_config_init(&pt);
  pt.begin = scratch_;
  pt.end = scratch_ + sizeof(scratch_);
  encoder_ = pt_alloc_encoder(&pt);
  PTSCOPE_CHECK(encoder_ != nullptr);
  PTSCOPE_CHECK(config_.tsc_per_ctc > 0 && config_.tsc_per_ctc < 512);
}

PtEncoderModel::~PtEncoderModel() { pt_free_encoder(encoder_); }

void PtEncoderModel::Emit(const void* packet) {
  pt_enc_sync_set(encoder_, 0);
  const int size = pt_enc_next(encoder_, static_cast<const pt_packet*>(packet));
  PTSCOPE_CHECK(size > 0);  // every packet we build is valid by construction
  sink_->Append(scratch_, static_cast<size_t>(size));
  bytes_since_psb_ += static_cast<uint64_t>(size);
  stats_.bytes += static_cast<uint64_t>(size);
  ++stats_.packets;
}

// Catches the stream's clock up to `tsc`: an MTC for the last crystal-clock edge crossed. Decoders
// correct a single 8-bit wrap of the MTC payload, so after a long pause (other threads ran) an MTC
// is also written at every 128th edge in between.
void PtEncoderModel::AdvanceTo(uint64_t tsc) {
  if (tsc > now_) now_ = tsc;
  if (!started_ || config_.timing < TimingMode::kMtc || tsc < next_mtc_) return;
  const uint64_t period = uint64_t{config_.tsc_per_ctc} << config_.mtc_freq;
  const uint64_t last_edge = tsc / period * period;
  const uint64_t max_step = period * 128;
  FlushTnt();
  uint64_t known = next_mtc_ - period;  // the last edge a decoder has (MTC, or TMA's CTC)
  while (last_edge - known > max_step) {
    known += max_step;
    EmitMtc(known);
  }
  EmitMtc(last_edge);
  next_mtc_ = last_edge + period;
}

void PtEncoderModel::EmitMtc(uint64_t edge) {
  // A CYC right at the edge: then "cycles since the last CYC" (hardware) and "cycles since the
  // last MTC" (what libipt's and perf's decoders assume after an MTC) are the same number, and
  // the CYCs between two MTCs sum to exactly the MTC period (libipt calibrates CYC from that).
  EmitCycTo(edge);
  pt_packet mtc{};
  mtc.type = ppt_mtc;
  mtc.payload.mtc.ctc = static_cast<uint8_t>((edge / config_.tsc_per_ctc) >> config_.mtc_freq);
  Emit(&mtc);
  cyc_ref_ = edge;
}

void PtEncoderModel::EmitTimeSync(uint64_t tsc) {
  if (config_.timing == TimingMode::kNone) return;
  pt_packet packet{};
  packet.type = ppt_tsc;
  packet.payload.tsc.tsc = tsc & ((uint64_t{1} << 56) - 1);
  Emit(&packet);
  cyc_ref_ = tsc;
  if (config_.timing < TimingMode::kMtc) return;
  const uint64_t ctc = tsc / config_.tsc_per_ctc;
  pt_packet tma{};
  tma.type = ppt_tma;
  tma.payload.tma.ctc = static_cast<uint16_t>(ctc & 0xffff);
  tma.payload.tma.fc = static_cast<uint16_t>(tsc % config_.tsc_per_ctc);
  Emit(&tma);
  const uint64_t period = uint64_t{config_.tsc_per_ctc} << config_.mtc_freq;
  next_mtc_ = (tsc / period + 1) * period;
}

void PtEncoderModel::EmitCycTo(uint64_t tsc) {
  if (config_.timing != TimingMode::kCyc || tsc <= cyc_ref_) return;
  pt_packet cyc{};
  cyc.type = ppt_cyc;
  cyc.payload.cyc.value = tsc - cyc_ref_;
  Emit(&cyc);
  cyc_ref_ = tsc;
}

void PtEncoderModel::EmitModeExec() {
  pt_packet mode{};
  mode.type = ppt_mode;
  mode.payload.mode.leaf = pt_mol_exec;
  mode.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
  Emit(&mode);
}

void PtEncoderModel::EmitIp(int type, uint64_t ip, bool suppressed) {
  pt_packet packet{};
  packet.type = static_cast<pt_packet_type>(type);
  if (suppressed) {
    packet.payload.ip.ipc = pt_ipc_suppressed;  // last-IP is not updated
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

void PtEncoderModel::EmitPsb(uint64_t ip, bool with_fup, uint64_t tsc) {
  FlushTnt();
  if (started_) EmitCycTo(tsc);  // keeps the CYC sum between two MTCs equal to their distance
  sink_->MarkPsb();
  bytes_since_psb_ = 0;
  ++stats_.psbs;
  started_ = true;
  pt_packet packet{};
  packet.type = ppt_psb;
  Emit(&packet);
  EmitTimeSync(tsc);
  pt_packet cbr{};
  cbr.type = ppt_cbr;
  cbr.payload.cbr.ratio = config_.cbr;
  Emit(&cbr);
  EmitModeExec();
  // Decoders restart here: no last-IP and no return-compression history survive a PSB.
  have_last_ip_ = false;
  last_ip_ = 0;
  ret_count_ = 0;
  if (with_fup) EmitIp(ppt_fup, ip, false);
  pt_packet end{};
  end.type = ppt_psbend;
  Emit(&end);
}

void PtEncoderModel::EmitEnable(uint64_t ip, uint64_t tsc) {
  if (!started_ || bytes_since_psb_ >= config_.psb_period) EmitPsb(0, false, tsc);
  EmitCycTo(tsc);
  EmitModeExec();
  EmitIp(ppt_tip_pge, ip, false);
  enabled_ = true;
}

void PtEncoderModel::AddTnt(bool taken, uint64_t tsc) {
  if (tnt_bits_ == 0) tnt_first_tsc_ = tsc;
  tnt_payload_ = (tnt_payload_ << 1) | (taken ? 1 : 0);
  if (++tnt_bits_ == 47) FlushTnt();
}

void PtEncoderModel::FlushTnt() {
  if (tnt_bits_ == 0) return;
  EmitCycTo(tnt_first_tsc_);
  pt_packet packet{};
  packet.type = tnt_bits_ <= 6 ? ppt_tnt_8 : ppt_tnt_64;
  packet.payload.tnt.bit_size = tnt_bits_;
  packet.payload.tnt.payload = tnt_payload_;
  Emit(&packet);
  tnt_bits_ = 0;
  tnt_payload_ = 0;
}

void PtEncoderModel::PushReturn(uint64_t address) {
  ret_stack_[ret_top_] = address;
  ret_top_ = (ret_top_ + 1) % kRetStackSize;
  if (ret_count_ < kRetStackSize) ++ret_count_;  // else the oldest entry was overwritten
}

void PtEncoderModel::Retire(const RetiredInsn& insn, uint64_t tsc) {
  AdvanceTo(tsc);
  if (!enabled_) {
    EmitEnable(insn.ip, tsc);
  } else if (bytes_since_psb_ >= config_.psb_period) {
    EmitPsb(insn.ip, true, tsc);
  }
  switch (insn.cls) {
    case InsnClass::kOther:
    case InsnClass::kJump:
      break;
    case InsnClass::kCondBranch:
      AddTnt(insn.next_ip != insn.fallthrough, tsc);
      break;
    case InsnClass::kCall:
      // A zero-length `call next` (PIC idiom) is not a call for return compression.
      if (insn.next_ip != insn.fallthrough) PushReturn(insn.fallthrough);
      break;
    case InsnClass::kIndirectCall:
      PushReturn(insn.fallthrough);
      [[fallthrough]];
    case InsnClass::kIndirectJump:
      FlushTnt();
      EmitCycTo(tsc);
      EmitIp(ppt_tip, insn.next_ip, false);
      break;
    case InsnClass::kReturn: {
      const int top = (ret_top_ + kRetStackSize - 1) % kRetStackSize;
      if (config_.return_compression && ret_count_ > 0 && ret_stack_[top] == insn.next_ip) {
        ret_top_ = top;
        --ret_count_;
        ++stats_.compressed_returns;
        AddTnt(true, tsc);
      } else {
        FlushTnt();  // a pending bit would be taken for a compressed return
        EmitCycTo(tsc);
        EmitIp(ppt_tip, insn.next_ip, false);
        // Decoders disagree on what an uncompressed return does to their return stack: perf pops
        // it on every RET, libipt only on compressed ones. Forgetting every pending call makes
        // later returns uncompressed until new calls arrive, which both decode identically
        // (a signal handler returning to __restore_rt showed the difference).
        ret_count_ = 0;
      }
      break;
    }
    case InsnClass::kSyscall:
      FlushTnt();
      EmitCycTo(tsc);
      EmitIp(ppt_tip_pgd, 0, true);
      enabled_ = false;
      break;
  }
}

void PtEncoderModel::AsyncBranch(uint64_t from, uint64_t to, uint64_t tsc) {
  AdvanceTo(tsc);
  if (!enabled_) {
    EmitEnable(to, tsc);
    return;
  }
  if (bytes_since_psb_ >= config_.psb_period) EmitPsb(from, true, tsc);
  FlushTnt();
  EmitCycTo(tsc);
  EmitIp(ppt_fup, from, false);
  EmitIp(ppt_tip, to, false);
}

void PtEncoderModel::Disable(uint64_t ip, uint64_t tsc) {
  AdvanceTo(tsc);
  if (!enabled_) return;
  FlushTnt();
  EmitCycTo(tsc);
  // FUP binds the disable to `ip` (asynchronous disable); a bare TIP.PGD would be bound to the
  // next branch and a decoder would run on past the last instruction that really retired.
  EmitIp(ppt_fup, ip, false);
  EmitIp(ppt_tip_pgd, 0, true);
  enabled_ = false;
}

void PtEncoderModel::FlushPending() { FlushTnt(); }

}  // namespace ptscope::emulate
