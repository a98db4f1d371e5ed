// Classifies x86-64 instructions for the PT encoder with Zydis, and caches the result by address
// (pt-emulate decodes each instruction once, not once per execution).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "pt_encoder_model.h"

namespace ptscope::emulate {

struct ClassifiedInsn {
  uint8_t size = 0;           // 0: not decodable
  InsnClass cls = InsnClass::kOther;
  bool repeats = false;       // rep-prefixed string op: single-step traps once per iteration
  bool is_int3 = false;       // the target gets a SIGTRAP of its own
  bool is_syscall = false;    // syscall/sysenter/int 0x80: PTRACE_SYSCALL stops at its entry
  uint64_t direct_target = 0; // for kJump/kCall/kCondBranch
};

// Decodes one instruction at `ip` from `bytes` (up to 15 are looked at).
ClassifiedInsn ClassifyInstruction(const uint8_t* bytes, size_t size, uint64_t ip);

// A per-address-space cache. Invalidate() after anything that may change code (mmap, munmap,
// mprotect, exec): decoded entries are dropped wholesale, which is cheap and always right.
class InsnCache {
 public:
  const ClassifiedInsn* Find(uint64_t ip) const {
    auto it = cache_.find(ip);
    return it == cache_.end() ? nullptr : &it->second;
  }
  const ClassifiedInsn& Insert(uint64_t ip, const ClassifiedInsn& insn) {
    return cache_.insert_or_assign(ip, insn).first->second;
  }
  void Invalidate() { cache_.clear(); }
  size_t size() const { return cache_.size(); }

 private:
  std::unordered_map<uint64_t, ClassifiedInsn> cache_;
};

}  // namespace ptscope::emulate
