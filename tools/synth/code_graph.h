// Basic blocks of an ELF's code, decoded with Zydis on first use and cached, with their successors
// resolved to block indices so that a random walk touches no hash map on its hot path.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "elf_code.h"

namespace ptscope::synth {

// How a block ends, as far as Intel PT is concerned.
enum class BlockEnd : uint8_t {
  kCondBranch,    // jcc/loop/jrcxz: one TNT bit
  kJump,          // direct jmp: no packet
  kCall,          // direct call: no packet, pushes the return address
  kIndirectJump,  // TIP
  kImportJump,    // jmp *x(%rip) (PLT stubs, tail calls through the GOT): into another module,
                  // which pt-synth treats as untraced code that returns to our caller
  kIndirectCall,  // TIP, pushes the return address
  kReturn,        // compressed (TNT bit) or TIP
  kSyscall,       // syscall/sysenter: leaves the user-only traced region (TIP.PGD, TIP.PGE)
  kDead,          // undecodable, outside the code, or an instruction a walk must not execute
                  // (int3, ud2, hlt, far transfers, interrupts): never entered
};

inline constexpr int32_t kUnresolved = -1;
inline constexpr int32_t kNoBlock = -2;  // the successor is outside the code or a dead block

struct Block {
  uint64_t start = 0;
  uint64_t end_ip = 0;        // address of the last (terminating) instruction
  uint64_t fallthrough = 0;   // address after the terminator
  uint64_t target = 0;        // direct branch/call target
  uint32_t first_size = 0;    // index of the first instruction size in CodeGraph::sizes()
  uint32_t instructions = 0;  // including the terminator
  BlockEnd end = BlockEnd::kDead;
  int32_t target_block = kUnresolved;       // resolved lazily
  int32_t fallthrough_block = kUnresolved;
  // Roughly how much work (instructions, calls weigh more) it takes from here to return from the
  // function: the walk steers by it when its call stack is deep. kNoReturn when unknown.
  uint32_t return_cost = 0;
  uint32_t visit_epoch = 0;  // the walk segment the visit count is for
  uint32_t visits = 0;       // visits in that segment: loops a walk is stuck in get left
  bool avoid = false;        // a syscall retry loop a walk got stuck in: conditional branches
                             // choose the other successor from now on
};

inline constexpr uint32_t kNoReturn = 1u << 30;

class CodeGraph {
 public:
  explicit CodeGraph(const ElfCode& elf);

  // The block starting at `ip` (decoded now if new), or kNoBlock when ip is not code or the
  // block is dead.
  int32_t BlockAt(uint64_t ip);
  const Block& block(int32_t index) const { return blocks_[static_cast<size_t>(index)]; }
  Block& block(int32_t index) { return blocks_[static_cast<size_t>(index)]; }
  int32_t Target(int32_t index);       // resolved successor blocks (kNoBlock when not viable)
  int32_t Fallthrough(int32_t index);
  // Sizes of the instructions of a block, in order (for ground-truth addresses).
  const uint8_t* sizes(const Block& b) const { return sizes_.data() + b.first_size; }

  // Viable function entries (blocks), for walk starts and indirect branch targets.
  const std::vector<int32_t>& entries() const { return entries_; }
  size_t block_count() const { return blocks_.size(); }
  // Also adds the targets of direct calls found by a linear sweep (stripped binaries), decodes
  // every block reachable from them without indirect branches (at most max_blocks) and computes
  // each block's return_cost.
  void CollectEntries(size_t max_blocks = 1u << 21);

 private:
  Block Decode(uint64_t ip);
  void ExpandFromEntries(size_t max_blocks);
  uint32_t CostOf(const Block& b) const;
  void ComputeReturnCosts();
  const ElfCode& elf_;
  std::vector<Block> blocks_;
  std::vector<uint8_t> sizes_;
  std::unordered_map<uint64_t, int32_t> by_start_;
  std::vector<int32_t> entries_;
};

}  // namespace ptscope::synth
