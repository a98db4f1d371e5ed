#include "code_graph.h"

#include <algorithm>

#include "insn_class.h"

namespace ptscope::synth {
namespace {

constexpr uint32_t kMaxBlockInstructions = 1u << 16;

// The instruction at `ip`, classified as pt-emulate classifies it (tools/ptgen); size 0 when it
// is outside the code or not decodable.
ptgen::ClassifiedInsn Decode1(const ElfCode& elf, uint64_t ip) {
  uint64_t available = 0;
  const uint8_t* bytes = elf.CodeAt(ip, &available);
  if (bytes == nullptr) return {};
  return ptgen::ClassifyInstruction(bytes, std::min<uint64_t>(available, 15), ip);
}

// The block end an instruction makes; false for a plain instruction. What a walk must never
// execute (must_not_execute: it would fault, stop the CPU or leave user mode in ways a user-only
// trace would not show as a plain syscall) ends a dead block.
bool Terminator(const ptgen::ClassifiedInsn& insn, BlockEnd* end, uint64_t* target) {
  using ptgen::InsnClass;
  if (insn.must_not_execute) {
    *end = BlockEnd::kDead;
    return true;
  }
  *target = insn.direct_target;
  switch (insn.cls) {
    case InsnClass::kOther: return false;
    case InsnClass::kCondBranch: *end = BlockEnd::kCondBranch; return true;
    case InsnClass::kJump: *end = BlockEnd::kJump; return true;
    case InsnClass::kCall: *end = BlockEnd::kCall; return true;
    case InsnClass::kIndirectJump:
      *end = insn.rip_indirect_jump ? BlockEnd::kImportJump : BlockEnd::kIndirectJump;
      return true;
    case InsnClass::kIndirectCall: *end = BlockEnd::kIndirectCall; return true;
    case InsnClass::kReturn: *end = BlockEnd::kReturn; return true;
    case InsnClass::kSyscall:
      *end = insn.is_syscall ? BlockEnd::kSyscall : BlockEnd::kDead;
      return true;
  }
  return false;
}

}  // namespace

CodeGraph::CodeGraph(const ElfCode& elf) : elf_(elf) {}

Block CodeGraph::Decode(uint64_t ip) {
  Block b;
  b.start = ip;
  b.first_size = static_cast<uint32_t>(sizes_.size());
  while (b.instructions < kMaxBlockInstructions) {
    const ptgen::ClassifiedInsn insn = Decode1(elf_, ip);
    if (insn.size == 0) {
      b.end = BlockEnd::kDead;
      break;
    }
    sizes_.push_back(insn.size);
    ++b.instructions;
    b.end_ip = ip;
    ip += insn.size;
    b.fallthrough = ip;
    if (Terminator(insn, &b.end, &b.target)) break;
  }
  if (b.instructions == kMaxBlockInstructions) b.end = BlockEnd::kDead;
  // `jmp` back into its own block is a loop without packets: a decoder could never tell where
  // the walk left it, so a walk must not enter it.
  if (b.end == BlockEnd::kJump && b.target >= b.start && b.target <= b.end_ip) b.end = BlockEnd::kDead;
  // A direct call/jmp out of the code (`call 0` to an undefined weak symbol, guarded by a check
  // that never lets it run) is never taken: perf cannot follow it to a TIP.PGD as libipt can.
  uint64_t available = 0;
  if ((b.end == BlockEnd::kCall || b.end == BlockEnd::kJump) && elf_.CodeAt(b.target, &available) == nullptr) {
    b.end = BlockEnd::kDead;
  }
  return b;
}

int32_t CodeGraph::BlockAt(uint64_t ip) {
  auto [it, inserted] = by_start_.try_emplace(ip, kNoBlock);
  if (!inserted) return it->second;
  Block b = Decode(ip);
  if (b.end == BlockEnd::kDead) {
    sizes_.resize(b.first_size);
    return kNoBlock;
  }
  blocks_.push_back(b);
  it->second = static_cast<int32_t>(blocks_.size() - 1);
  return it->second;
}

int32_t CodeGraph::Target(int32_t index) {
  if (block(index).target_block == kUnresolved) {
    const int32_t resolved = BlockAt(block(index).target);
    block(index).target_block = resolved;
  }
  return block(index).target_block;
}

int32_t CodeGraph::Fallthrough(int32_t index) {
  if (block(index).fallthrough_block == kUnresolved) {
    const int32_t resolved = BlockAt(block(index).fallthrough);
    block(index).fallthrough_block = resolved;
  }
  return block(index).fallthrough_block;
}

void CodeGraph::CollectEntries(size_t max_blocks) {
  std::vector<uint64_t> candidates = elf_.function_entries;
  for (const CodeRange& range : elf_.code) {
    for (uint64_t ip = range.start; ip < range.start + range.size;) {
      const ptgen::ClassifiedInsn insn = Decode1(elf_, ip);
      if (insn.size == 0) {
        ++ip;
        continue;
      }
      if (insn.cls == ptgen::InsnClass::kCall) candidates.push_back(insn.direct_target);
      ip += insn.size;
    }
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  entries_.clear();
  for (uint64_t ip : candidates) {
    const int32_t b = BlockAt(ip);
    if (b >= 0) entries_.push_back(b);
  }
  ExpandFromEntries(max_blocks);
  ComputeReturnCosts();
}

void CodeGraph::ExpandFromEntries(size_t max_blocks) {
  std::vector<int32_t> work(entries_.begin(), entries_.end());
  std::vector<bool> seen(blocks_.size(), false);
  while (!work.empty() && blocks_.size() < max_blocks) {
    const int32_t index = work.back();
    work.pop_back();
    if (static_cast<size_t>(index) < seen.size() && seen[static_cast<size_t>(index)]) continue;
    if (seen.size() < blocks_.size()) seen.resize(blocks_.size(), false);
    seen[static_cast<size_t>(index)] = true;
    const BlockEnd end = block(index).end;
    if (end == BlockEnd::kCondBranch || end == BlockEnd::kJump || end == BlockEnd::kCall) {
      const int32_t t = Target(index);
      if (t >= 0) work.push_back(t);
    }
    if (end == BlockEnd::kCondBranch || end == BlockEnd::kCall || end == BlockEnd::kIndirectCall ||
        end == BlockEnd::kSyscall) {
      const int32_t f = Fallthrough(index);
      if (f >= 0) work.push_back(f);
    }
  }
}

uint32_t CodeGraph::CostOf(const Block& b) const {
  auto cost = [this](int32_t i) { return i >= 0 ? blocks_[static_cast<size_t>(i)].return_cost : kNoReturn; };
  const uint64_t own = b.instructions;
  uint64_t rest = kNoReturn;
  switch (b.end) {
    case BlockEnd::kReturn: case BlockEnd::kImportJump: rest = 0; break;
    case BlockEnd::kCondBranch: rest = std::min(cost(b.target_block), cost(b.fallthrough_block)); break;
    case BlockEnd::kJump: rest = cost(b.target_block); break;
    case BlockEnd::kCall: rest = uint64_t{cost(b.target_block)} + cost(b.fallthrough_block) + 8; break;
    case BlockEnd::kIndirectCall: rest = uint64_t{cost(b.fallthrough_block)} + 64; break;
    case BlockEnd::kSyscall: rest = uint64_t{cost(b.fallthrough_block)} + 8; break;
    case BlockEnd::kIndirectJump: rest = 1024; break;
    case BlockEnd::kDead: break;
  }
  return static_cast<uint32_t>(std::min<uint64_t>(own + rest, kNoReturn));
}

// Shortest "distance to a return" by repeated relaxation; blocks were discovered roughly
// callers-first, so sweeping from the last one converges in a few passes.
void CodeGraph::ComputeReturnCosts() {
  for (Block& b : blocks_) b.return_cost = kNoReturn;
  for (int pass = 0; pass < 64; ++pass) {
    bool changed = false;
    for (size_t i = blocks_.size(); i-- > 0;) {
      const uint32_t cost = CostOf(blocks_[i]);
      if (cost < blocks_[i].return_cost) {
        blocks_[i].return_cost = cost;
        changed = true;
      }
    }
    if (!changed) break;
  }
}

}  // namespace ptscope::synth
