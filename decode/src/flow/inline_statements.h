// InlineStatements: which kInlineChange events a block needs. A block is contiguous code; CodeFacts
// know where the inlined depth changes in the function around it (one DWARF walk per function).
// A block where it does not change needs nothing (unless a transfer came before it, below);
// otherwise the instructions where it changes are found by walking instruction lengths (Zydis,
// minimal mode). A block inside the function of the block before is answered from that stretch;
// any other is cached by its first address (BlockFacts): afterwards it costs one hash look-up.
//
// What is stated: a change of depth always, and any non-zero depth at the first block after a
// transfer (an event other than kInlineChange), since the stack tracker closes the caller's
// inlined slices at calls and returns. The depth before a unit's first block is unknown to the
// unit (and to a thread switched in on a per-CPU stream), so that block always states it.
#pragma once

#include <intel-pt.h>

#include <algorithm>
#include <cstdint>

#include "events.h"
#include "flow/block_facts.h"
#include "flow/code_images.h"

namespace ptscope::decode {

// Whether a block starting at inlined depth `first_depth` states it (a kInlineChange), after
// code at `current` depth. (Bitwise, without a branch: whether an event came since the last
// block is unpredictable, and this runs for every block.)
inline bool RestatesDepth(bool after_transfer, uint32_t current, uint32_t first_depth) {
  const bool either_nonzero = (first_depth | current) != 0;
  const bool changes = first_depth != current;
  return (after_transfer & either_nonzero) | (!after_transfer & changes);
}

class InlineStatements {
 public:
  static constexpr uint32_t kMaxInlineDepth = 64;  // deeper inlined chains are cut here
  static constexpr uint32_t kUnknownDepth = UINT32_MAX;

  explicit InlineStatements(BlockFacts& facts) : facts_(facts) {}
  // Without CodeFacts (the default) no block needs a statement.
  void SetCodeFacts(CodeFacts* code) { code_ = code; }
  bool enabled() const { return code_ != nullptr; }

  // An event other than kInlineChange was queued: the tracker's top frame may have changed.
  void Transfer(bool happened) { after_transfer_ = after_transfer_ | happened; }
  // The depth before the next block is not known (a unit's start, a thread switched in).
  void Unknown() {
    depth_ = kUnknownDepth;
    UpdateRestate();
  }
  // A gap: the tracker closes everything, depth 0.
  void Reset() {
    depth_ = 0;
    UpdateRestate();
  }

  // HandleBlock's common case in a few instructions: the block lies in the stretch of the block
  // before, at one depth, and that depth needs no statement. (Unsigned differences: one compare
  // per end, and an empty window contains nothing.)
  [[gnu::always_inline]] bool Quiet(const pt_block& block) {
    const bool inside =
        block.ip - fast_begin_ < fast_width_ && block.end_ip - fast_begin_ < fast_width_;
    if (inside && ((restate_ >> static_cast<unsigned>(after_transfer_)) & 1) == 0) {
      after_transfer_ = false;
      return true;
    }
    return false;
  }
  // The window in which Quiet holds for every block (its first and last address inside) from now
  // on, as long as only such blocks come: false when none does (no window, or a depth to state).
  // After such blocks, QuietBlocks does what Quiet did for them.
  bool QuietWindow(uint64_t* begin, uint64_t* width) const {
    // Quiet's test for the first block (after_transfer_ as it is), and for the next ones (false).
    if ((restate_ & (after_transfer_ ? 3 : 1)) != 0) return false;
    *begin = fast_begin_;
    *width = fast_width_;
    return true;
  }
  void QuietBlocks() { after_transfer_ = false; }
  // The statements `block` needs (it starts at instruction `block_position`), each handed to
  // `state(position, ip, depth)`; `time_ns` chooses the mappings.
  template <typename State>
  void StateBlock(const pt_block& block, uint64_t block_position, const ThreadImage& image,
                  uint64_t time_ns, State&& state) {
    const BlockInline& info = InlineOf(block, image, time_ns);
    const bool restate = RestatesDepth(after_transfer_, depth_, info.first_depth);
    after_transfer_ = false;
    if (restate) {
      depth_ = info.first_depth;
      state(block_position, block.ip, depth_);
    }
    for (const InlineStep& step : info.steps) {
      depth_ = step.depth;
      state(block_position + step.index, step.ip, depth_);
    }
    RefreshFast(image.pid());  // InlineOf may have moved the stretch
  }
  // Sets the fast window (see Quiet) from the worker's stretch for `pid`; called wherever the
  // stretch or the pid changes.
  void RefreshFast(uint32_t pid) {
    const BlockFacts::KnownStretch& current = facts_.Current();
    const InlineDepthStretch& stretch = current.stretch;
    if (stretch.uniform && current.pid == pid && stretch.begin < stretch.end) {
      fast_begin_ = stretch.begin;
      fast_width_ = stretch.end - stretch.begin;
      fast_depth_ = std::min(stretch.uniform_depth, kMaxInlineDepth);
    } else {
      fast_begin_ = fast_width_ = 0;
    }
    UpdateRestate();
  }

 private:
  const BlockInline& InlineOf(const pt_block& block, const ThreadImage& image, uint64_t time_ns);
  // restate_ for the current depth_ and fast_depth_; called wherever either changes (StateBlock
  // changes depth_ and ends in RefreshFast).
  void UpdateRestate() {
    restate_ = static_cast<uint8_t>((RestatesDepth(false, depth_, fast_depth_) ? 1 : 0) |
                                    (RestatesDepth(true, depth_, fast_depth_) ? 2 : 0));
  }

  CodeFacts* code_ = nullptr;
  BlockFacts& facts_;
  uint32_t depth_ = 0;  // at the last instruction (kUnknownDepth: not known)
  bool after_transfer_ = false;
  uint64_t fast_begin_ = 0, fast_width_ = 0;  // the window [begin, begin + width)
  uint32_t fast_depth_ = 0;
  // RestatesDepth(after_transfer, depth_, fast_depth_) as bit `after_transfer`: Quiet's test
  // for every block in one shift, as the depths change far less often than blocks come.
  uint8_t restate_ = 0;
};

}  // namespace ptscope::decode
