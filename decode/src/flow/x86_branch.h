// Just enough x86-64 decoding to classify a block's last instruction and know its length:
// libipt reports ptic_error for blocks taken from its block cache, and never the size of the
// last instruction, which a call's return address needs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ptscope::decode {

enum class BranchClass : uint8_t {
  kOther,       // not a control transfer (or not decodable here)
  kCall,        // near call, direct or indirect
  kReturn,      // near ret
  kJump,        // near unconditional jump, direct or indirect
  kCondJump,    // jcc, loop, jrcxz
  kFarCall,     // syscall, sysenter, int n, int3, far call
  kFarReturn,   // sysret, iret, far ret
  kFarJump,     // far jmp
};

struct BranchInsn {
  BranchClass branch_class = BranchClass::kOther;
  uint8_t size = 0;  // 0 when unknown (kOther)
};

// Classifies the instruction starting at bytes[0]; `size` bytes are readable.
BranchInsn ClassifyBranch(const uint8_t* bytes, size_t size);

}  // namespace ptscope::decode
