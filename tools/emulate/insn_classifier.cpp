#include "insn_classifier.h"

#include <Zydis/Zydis.h>

namespace ptscope::emulate {
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

}  // namespace

ClassifiedInsn ClassifyInstruction(const uint8_t* bytes, size_t size, uint64_t ip) {
  ClassifiedInsn out;
  ZydisDecodedInstruction insn;
  ZydisDecodedOperand operands[ZYDIS_MAX_OPERAND_COUNT];
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&Decoder(), bytes, size, &insn, operands))) return out;
  out.size = insn.length;
  const bool relative = insn.operand_count_visible > 0 &&
                        operands[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
                        operands[0].imm.is_relative;
  if (relative) {
    ZyanU64 target = 0;
    if (ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&insn, &operands[0], ip, &target))) {
      out.direct_target = target;
    }
  }
  switch (insn.meta.category) {
    case ZYDIS_CATEGORY_COND_BR:
      out.cls = InsnClass::kCondBranch;
      break;
    case ZYDIS_CATEGORY_UNCOND_BR:
      out.cls = IsFar(insn) ? InsnClass::kSyscall
                : relative  ? InsnClass::kJump
                            : InsnClass::kIndirectJump;
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
  constexpr ZydisInstructionAttributes kRep =
      ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE;
  out.repeats = out.cls == InsnClass::kOther && (insn.attributes & kRep) != 0;
  return out;
}

}  // namespace ptscope::emulate
