// What an x86-64 instruction does to control flow, as far as Intel PT is concerned, decoded with
// Zydis: the one classification pt-emulate (each stepped instruction) and pt-synth (each block's
// terminator) both use, so that both generators emit the same packets for the same code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ptscope::ptgen {

enum class InsnClass : uint8_t {
  kOther,         // no branch: next ip is the fall-through
  kCondBranch,    // jcc/loop/jrcxz: one TNT bit
  kJump,          // direct near jmp: no packet
  kCall,          // direct near call: no packet, pushed for return compression
  kIndirectJump,  // TIP
  kIndirectCall,  // TIP, pushed for return compression
  kReturn,        // near ret: compressed (TNT bit) or TIP
  kSyscall,       // syscall/sysenter/int n/far transfers/iret: leaves the traced (user) region
};

struct ClassifiedInsn {
  uint8_t size = 0;              // 0: not decodable
  InsnClass cls = InsnClass::kOther;
  uint64_t direct_target = 0;    // kJump/kCall/kCondBranch: where the relative operand points
  bool repeats = false;          // rep-prefixed string op: single-step traps once per iteration
  bool is_int3 = false;          // the target gets a SIGTRAP of its own
  bool is_syscall = false;       // syscall/sysenter/int 0x80: PTRACE_SYSCALL stops at its entry
  bool rip_indirect_jump = false;  // jmp *x(%rip): PLT stubs, tail calls through the GOT
  // Faults, stops the CPU or leaves user mode other than by a plain system call (int3, int n,
  // ud*, hlt, iret, sysret/sysexit, far transfers, xbegin/xabort/xend): a generated walk never
  // runs it.
  bool must_not_execute = false;
};

// Decodes one instruction at `ip` from `bytes` (up to 15 are looked at).
ClassifiedInsn ClassifyInstruction(const uint8_t* bytes, size_t size, uint64_t ip);

}  // namespace ptscope::ptgen
