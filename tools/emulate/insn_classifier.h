// pt-emulate's cache of classified instructions by address (each instruction is decoded once, not
// once per execution).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "insn_class.h"
#include "pt_encoder_model.h"

namespace ptscope::emulate {

// The classification itself is tools/ptgen's (shared with pt-synth).
using ClassifiedInsn = ptgen::ClassifiedInsn;
using ptgen::ClassifyInstruction;

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
