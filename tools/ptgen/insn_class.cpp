#include "insn_class.h"

#include <Zydis/Zydis.h>

namespace ptscope::ptgen {
namespace {

const ZydisDecoder& Decoder() {
  static const ZydisDecoder decoder = [] {
    ZydisDecoder d;
    ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    return d;
  }();
  return decoder;
}

bool IsFar(const ZydisDecodedInstruction& insn) {
  return insn.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
}

bool MustNotExecute(const ZydisDecodedInstruction& insn) {
  switch (insn.mnemonic) {
    case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1:
    case ZYDIS_MNEMONIC_INTO: case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1:
    case ZYDIS_MNEMONIC_UD2: case ZYDIS_MNEMONIC_HLT: case ZYDIS_MNEMONIC_IRET:
    case ZYDIS_MNEMONIC_IRETD: case ZYDIS_MNEMONIC_IRETQ: case ZYDIS_MNEMONIC_SYSRET:
    case ZYDIS_MNEMONIC_SYSEXIT: case ZYDIS_MNEMONIC_XBEGIN: case ZYDIS_MNEMONIC_XABORT:
      return true;
    case ZYDIS_MNEMONIC_XEND:
      // A walk never runs xbegin, so it is never inside a transaction, and xend outside one
      // raises #GP: no real program retires it there, and a trace with it would show code that
      // hardware never traced. (libc reaches xend only after its own xbegin succeeded.)
      return true;
    default:
      return IsFar(insn) || insn.meta.category == ZYDIS_CATEGORY_INTERRUPT ||
             insn.meta.category == ZYDIS_CATEGORY_SYSRET;
  }
}

}  // namespace

ClassifiedInsn ClassifyInstruction(const uint8_t* bytes, size_t size, uint64_t ip) {
  ClassifiedInsn out;
  ZydisDecoderContext context;
  ZydisDecodedInstruction insn;
  // Without operand decoding (the raw immediate is all a branch needs): pt-synth sweeps whole
  // binaries with this, pt-emulate every new instruction address.
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&Decoder(), &context, bytes, size, &insn)))
    return out;
  out.size = insn.length;
  const bool relative = insn.raw.imm[0].is_relative;
  if (relative)
    out.direct_target = ip + insn.length + static_cast<uint64_t>(insn.raw.imm[0].value.s);
  switch (insn.meta.category) {
    case ZYDIS_CATEGORY_COND_BR:
      // Zydis files xbegin (c7 f8 rel) and xend (0f 01 d5) here too. For PT they are not
      // branches: hardware writes no TNT bit for them (only Jcc, JrCXZ and LOOPcc take one;
      // libipt's pt_instruction_decode makes both ptic_other, as does our walker). On a CPU
      // with TSX they write MODE.TSX + FUP, and an abort MODE.TSX + FUP + TIP to xbegin's
      // fallback; we do not write MODE.TSX (the walker does not model TSX events), so the
      // generators treat them as plain instructions (see pt_encoder_model.cpp for an abort).
      out.cls = insn.mnemonic == ZYDIS_MNEMONIC_XBEGIN || insn.mnemonic == ZYDIS_MNEMONIC_XEND
                    ? InsnClass::kOther
                    : InsnClass::kCondBranch;
      break;
    case ZYDIS_CATEGORY_UNCOND_BR:
      out.cls = IsFar(insn) ? InsnClass::kSyscall
                : relative  ? InsnClass::kJump
                            : InsnClass::kIndirectJump;
      out.rip_indirect_jump = out.cls == InsnClass::kIndirectJump &&
                              (insn.attributes & ZYDIS_ATTRIB_HAS_MODRM) != 0 &&
                              insn.raw.modrm.mod == 0 && insn.raw.modrm.rm == 5;
      break;
    case ZYDIS_CATEGORY_CALL:
      out.cls = IsFar(insn) ? InsnClass::kSyscall
                : relative  ? InsnClass::kCall
                            : InsnClass::kIndirectCall;
      break;
    case ZYDIS_CATEGORY_RET:
      out.cls = (IsFar(insn) || insn.mnemonic != ZYDIS_MNEMONIC_RET) ? InsnClass::kSyscall
                                                                    : InsnClass::kReturn;
      break;
    case ZYDIS_CATEGORY_SYSCALL:
    case ZYDIS_CATEGORY_SYSRET:
    case ZYDIS_CATEGORY_INTERRUPT:
      out.cls = InsnClass::kSyscall;
      out.is_int3 = insn.mnemonic == ZYDIS_MNEMONIC_INT3;
      out.is_syscall = insn.mnemonic == ZYDIS_MNEMONIC_SYSCALL ||
                       insn.mnemonic == ZYDIS_MNEMONIC_SYSENTER ||
                       (insn.mnemonic == ZYDIS_MNEMONIC_INT && size >= 2 && bytes[0] == 0xcd &&
                        bytes[1] == 0x80);
      break;
    default:
      if (insn.mnemonic == ZYDIS_MNEMONIC_IRET || insn.mnemonic == ZYDIS_MNEMONIC_IRETD ||
          insn.mnemonic == ZYDIS_MNEMONIC_IRETQ) {
        out.cls = InsnClass::kSyscall;
      }
      break;
  }
  out.must_not_execute = MustNotExecute(insn);
  constexpr ZydisInstructionAttributes kRep =
      ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE;
  out.repeats = out.cls == InsnClass::kOther && (insn.attributes & kRep) != 0;
  return out;
}

}  // namespace ptscope::ptgen
