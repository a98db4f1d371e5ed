// Control-flow instruction classification for 64-bit code (Intel SDM vol. 2 opcode map).
#include "flow/x86_branch.h"

namespace ptscope::decode {
namespace {

bool IsLegacyPrefix(uint8_t byte) {
  switch (byte) {
    case 0x66: case 0x67: case 0xf0: case 0xf2: case 0xf3:
    case 0x2e: case 0x36: case 0x3e: case 0x26: case 0x64: case 0x65:
      return true;
    default:
      return false;
  }
}

// Length of a ModRM operand (ModRM byte, optional SIB, displacement) starting at bytes[at].
// Returns 0 when the bytes end too early.
size_t ModrmLength(const uint8_t* bytes, size_t size, size_t at) {
  if (at >= size) return 0;
  uint8_t modrm = bytes[at];
  uint8_t mod = modrm >> 6, rm = modrm & 7;
  size_t length = 1;
  if (mod == 3) return length;
  if (rm == 4) {
    if (at + 1 >= size) return 0;
    uint8_t base = bytes[at + 1] & 7;
    length += 1;
    if (mod == 0 && base == 5) length += 4;
  } else if (mod == 0 && rm == 5) {
    length += 4;  // RIP-relative disp32
  }
  if (mod == 1) length += 1;
  if (mod == 2) length += 4;
  return at + length <= size ? length : 0;
}

BranchInsn Make(BranchClass branch_class, size_t size, size_t available) {
  if (size == 0 || size > available || size > 15) return {};
  return BranchInsn{branch_class, static_cast<uint8_t>(size)};
}

BranchInsn ClassifyTwoByte(const uint8_t* bytes, size_t size, size_t at) {
  if (at >= size) return {};
  uint8_t opcode = bytes[at];
  if (opcode >= 0x80 && opcode <= 0x8f) return Make(BranchClass::kCondJump, at + 5, size);
  switch (opcode) {
    case 0x05: case 0x34: return Make(BranchClass::kFarCall, at + 1, size);    // syscall, sysenter
    case 0x07: case 0x35: return Make(BranchClass::kFarReturn, at + 1, size);  // sysret, sysexit
    default: return {};
  }
}

}  // namespace

BranchInsn ClassifyBranch(const uint8_t* bytes, size_t size) {
  size_t at = 0;
  while (at < size && at < 14 && IsLegacyPrefix(bytes[at])) ++at;
  if (at < size && (bytes[at] & 0xf0) == 0x40) ++at;  // REX
  if (at >= size) return {};
  uint8_t opcode = bytes[at];
  if (opcode >= 0x70 && opcode <= 0x7f) return Make(BranchClass::kCondJump, at + 2, size);
  switch (opcode) {
    case 0x0f: return ClassifyTwoByte(bytes, size, at + 1);
    case 0xe8: return Make(BranchClass::kCall, at + 5, size);
    case 0xe9: return Make(BranchClass::kJump, at + 5, size);
    case 0xeb: return Make(BranchClass::kJump, at + 2, size);
    case 0xe0: case 0xe1: case 0xe2: case 0xe3: return Make(BranchClass::kCondJump, at + 2, size);
    case 0xc3: return Make(BranchClass::kReturn, at + 1, size);
    case 0xc2: return Make(BranchClass::kReturn, at + 3, size);
    case 0xcb: case 0xcf: return Make(BranchClass::kFarReturn, at + 1, size);
    case 0xca: return Make(BranchClass::kFarReturn, at + 3, size);
    case 0xcc: return Make(BranchClass::kFarCall, at + 1, size);
    case 0xcd: return Make(BranchClass::kFarCall, at + 2, size);
    case 0xff: {
      if (at + 1 >= size) return {};
      uint8_t reg = (bytes[at + 1] >> 3) & 7;
      size_t operand = ModrmLength(bytes, size, at + 1);
      if (operand == 0) return {};
      switch (reg) {
        case 2: return Make(BranchClass::kCall, at + 1 + operand, size);
        case 3: return Make(BranchClass::kFarCall, at + 1 + operand, size);
        case 4: return Make(BranchClass::kJump, at + 1 + operand, size);
        case 5: return Make(BranchClass::kFarJump, at + 1 + operand, size);
        default: return {};
      }
    }
    default:
      return {};
  }
}

}  // namespace ptscope::decode
