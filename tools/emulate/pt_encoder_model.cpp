// Which packets each retired instruction makes; the packets themselves are tools/ptgen's.
#include "pt_encoder_model.h"

namespace ptscope::emulate {

void PtEncoderModel::Retire(const RetiredInsn& insn, uint64_t tsc) {
  if (!enabled_) {
    encoder_.Enable(insn.ip, tsc);  // catches the clock up itself (at once after a long gap)
    enabled_ = true;
  } else {
    encoder_.AdvanceTo(tsc);
    encoder_.MaybePsb(insn.ip, tsc);
  }
  switch (insn.cls) {
    case InsnClass::kOther:
    case InsnClass::kJump:
      // kOther includes xbegin and xend: hardware writes no TNT bit for them. It writes
      // MODE.TSX + FUP where the transaction state changes, which this model leaves out (no
      // decoder here models TSX events). An abort, which sends a stepped program to xbegin's
      // fallback, is unexpected flow to the stepping loop (tracer_loop.cpp): AsyncBranch, i.e.
      // FUP + TIP, the packets hardware writes after the abort's MODE.TSX.
      break;
    case InsnClass::kCondBranch:
      encoder_.CondBranch(insn.next_ip != insn.fallthrough, tsc);
      break;
    case InsnClass::kCall:
      encoder_.Call(insn.fallthrough, insn.next_ip == insn.fallthrough);
      break;
    case InsnClass::kIndirectCall:
      encoder_.Call(insn.fallthrough, false);
      encoder_.IndirectBranch(insn.next_ip, tsc);
      break;
    case InsnClass::kIndirectJump:
      encoder_.IndirectBranch(insn.next_ip, tsc);
      break;
    case InsnClass::kReturn:
      encoder_.Return(insn.next_ip, tsc);
      break;
    case InsnClass::kSyscall:  // leaves the traced (user) region: TIP.PGD bound to it
      encoder_.Disable(0, true, tsc);
      enabled_ = false;
      break;
  }
}

void PtEncoderModel::AsyncBranch(uint64_t from, uint64_t to, uint64_t tsc) {
  if (!enabled_) {
    encoder_.Enable(to, tsc);
    enabled_ = true;
    return;
  }
  encoder_.AdvanceTo(tsc);
  encoder_.MaybePsb(from, tsc);
  encoder_.AsyncBranch(from, to, tsc);
}

void PtEncoderModel::Disable(uint64_t ip, uint64_t tsc) {
  encoder_.AdvanceTo(tsc);
  if (!enabled_) return;
  encoder_.DisableAt(ip, tsc);
  enabled_ = false;
}

}  // namespace ptscope::emulate
