// BlockFacts: a decode worker's cache of facts about code that never change for a (pid, address)
// (JIT code aside): the inlined depth of each instruction of a block, the branch a block ends
// with and the length of a call instruction (its return address). Shared by the FlowDecoders a
// worker creates one after another, since blocks repeat across units.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "events.h"
#include "flat_map.h"
#include "flow/x86_branch.h"

namespace ptscope::decode {

// Key: (pid, block start or end).
struct BlockKey {
  uint32_t pid;
  uint64_t ip;
  bool operator==(const BlockKey&) const = default;
};
// Fibonacci hashing of (pid, address) for FlatMap (which takes the top bits).
struct BlockKeyHash {
  uint64_t operator()(const BlockKey& key) const {
    return (key.ip ^ (static_cast<uint64_t>(key.pid) << 47)) * 0x9E3779B97F4A7C15ull;
  }
};

// Inlined depth of each instruction of a block.
struct InlineStep {
  uint32_t index = 0;  // instruction index in the block
  uint32_t depth = 0;
  uint64_t ip = 0;
};
struct BlockInline {
  static constexpr uint32_t kNoStretch = UINT32_MAX;
  uint64_t end_ip = 0;
  uint32_t first_depth = 0;
  // The stretch holding the whole block (an index into BlockFacts::stretches), if one does.
  uint32_t stretch = kNoStretch;
  std::vector<InlineStep> steps;  // depth changes after the first instruction
};

// A function's code, [start, start + size) (size 0: none known).
struct FunctionBounds {
  uint64_t start = 0, size = 0;
  bool Contains(uint64_t ip) const { return ip - start < size; }
};

struct BlockFacts {
  FlatMap<BlockKey, BlockInline, BlockKeyHash> blocks;
  FlatMap<BlockKey, BranchInsn, BlockKeyHash> branches;
  // The lengths of the call instructions that ended blocks, direct-mapped in front of `branches`,
  // for the blocks that do not come with their call's length (libipt's, and the walker's that
  // were not one cached run: see FlowDecoder::HandleBlock). Allocated at a decoder's first
  // segment.
  struct CallLength {
    uint64_t end_ip = 0;  // 0: an empty slot (no call ends at address 0)
    uint32_t pid = 0;
    uint8_t size = 0;
  };
  static constexpr unsigned kCallLengthBits = 12;
  static constexpr size_t kCallLengthSlots = size_t{1} << kCallLengthBits;
  std::unique_ptr<CallLength[]> call_lengths;
  // CodeFacts::FunctionRange's answers for the targets of events (the current function of the
  // FlowDecoder after them), direct-mapped: asked at the first conditional branch after an event.
  struct FunctionAt {
    uint64_t ip = 0;  // 0: an empty slot
    uint32_t pid = 0;
    FunctionBounds bounds;
  };
  static constexpr unsigned kFunctionBits = 12;
  std::unique_ptr<FunctionAt[]> functions;
  // CodeFacts' answers about stretches of code, and which one the last block lay in (`current`):
  // new blocks of the same function need no question to the (locked) CodeFacts. A block from
  // the per-block table makes its own stretch current again, so that the blocks after it in
  // the same function need no look-up (InlineStatements::Quiet) and can be walked as quiet
  // blocks. (Before, the stretch stayed with the function last asked about, and every block of
  // the others went through the table: bench-workload's snprintf, 15% of its blocks.)
  struct KnownStretch {
    InlineDepthStretch stretch;
    uint32_t pid = 0;
  };
  // One per (pid, first address) of a stretch that covers the address asked about; an answer
  // that covers nothing there (JIT code, code without a function) is kept in `uncovered` only.
  std::vector<KnownStretch> stretches;
  FlatMap<BlockKey, uint32_t, BlockKeyHash> stretch_index;  // (pid, begin) -> index
  KnownStretch uncovered;
  static constexpr uint32_t kUncovered = BlockInline::kNoStretch - 1;
  uint32_t current = BlockInline::kNoStretch;
  const KnownStretch& Current() const {
    static const KnownStretch none;
    if (current < stretches.size()) return stretches[current];
    return current == kUncovered ? uncovered : none;
  }
  // CodeFacts' answer for (pid, address) becomes current.
  void NoteStretch(uint32_t pid, uint64_t address, InlineDepthStretch answer) {
    if (!answer.Contains(address)) {
      uncovered = KnownStretch{std::move(answer), pid};
      current = kUncovered;
      return;
    }
    auto [index, inserted] = stretch_index.TryEmplace(BlockKey{pid, answer.begin});
    if (inserted) {
      *index = static_cast<uint32_t>(stretches.size());
      stretches.push_back(KnownStretch{std::move(answer), pid});
    } else {
      stretches[*index] = KnownStretch{std::move(answer), pid};  // (the same, asked again)
    }
    current = *index;
  }
  // --format insns: where each instruction of a block starts, as offsets from its first address
  // (the longest block seen from there).
  FlatMap<BlockKey, std::vector<uint32_t>, BlockKeyHash> layouts;
  BlockInline uniform;  // InlineStatements::InlineOf's answer for a block inside `stretch`
};

}  // namespace ptscope::decode
