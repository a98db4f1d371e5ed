// Inlined depths of blocks (see inline_statements.h).
#include "flow/inline_statements.h"

#include <algorithm>

#include "ptscope/symbols.h"

namespace ptscope::decode {

uint32_t InlineDepthStretch::DepthAt(uint64_t address) const {
  return span->DepthAt(address - bias);
}

bool InlineDepthStretch::ChangesIn(uint64_t from, uint64_t to) const {
  // The first step after `from` (steps hold only real changes of depth).
  const auto& steps = span->steps;
  auto next = std::upper_bound(steps.begin(), steps.end(), from - bias,
                               [](uint64_t a, const symbols::InlineDepthSpan::Step& s) {
                                 return a < s.vaddr;
                               });
  return next != steps.end() && next->vaddr <= to - bias;
}

const BlockInline& InlineStatements::InlineOf(const pt_block& block, const ThreadImage& image,
                                              uint64_t time_ns) {
  const uint32_t pid = image.pid();
  // Most blocks lie in the function (or the stretch without debug info) of the block before: the
  // stretch answers without a look-up in the (cache-missing) per-block table.
  const InlineDepthStretch& last = facts_.Current().stretch;
  if (facts_.Current().pid == pid && last.Contains(block.ip) && last.Contains(block.end_ip) &&
      (last.uniform || !last.ChangesIn(block.ip, block.end_ip))) {
    facts_.uniform.first_depth =
        std::min(last.uniform ? last.uniform_depth : last.DepthAt(block.ip), kMaxInlineDepth);
    return facts_.uniform;
  }
  auto [found, inserted] = facts_.blocks.TryEmplace(BlockKey{pid, block.ip});
  BlockInline& info = *found;
  if (!inserted && info.end_ip == block.end_ip) {
    if (info.stretch != BlockInline::kNoStretch) facts_.current = info.stretch;
    return info;
  }
  info = BlockInline{};
  info.end_ip = block.end_ip;
  // Depths come from CodeFacts' stretch for the function when it has one (one question per
  // function), else per instruction.
  bool ask_for_stretch = true;
  auto depth_at = [&](uint64_t ip) {
    if ((facts_.Current().pid != pid || !facts_.Current().stretch.Contains(ip)) &&
        ask_for_stretch) {
      facts_.NoteStretch(pid, ip, code_->InlineStretch(pid, ip, time_ns));
      // None here: do not ask again for this block.
      ask_for_stretch = facts_.Current().stretch.Contains(ip);
    }
    const BlockFacts::KnownStretch& current = facts_.Current();
    uint32_t depth = current.stretch.Contains(ip) && current.pid == pid
                         ? current.stretch.DepthAt(ip)
                         : code_->InlineDepth(pid, ip, time_ns);
    return std::min(depth, kMaxInlineDepth);
  };
  info.first_depth = depth_at(block.ip);
  const InlineDepthStretch& stretch = facts_.Current().stretch;
  const bool in_stretch = stretch.Contains(block.ip) && stretch.Contains(block.end_ip);
  // (Current() is this pid's: depth_at asked for the block's first address.)
  if (in_stretch && facts_.Current().pid == pid && facts_.current < facts_.stretches.size()) {
    info.stretch = facts_.current;
  }
  if (in_stretch && !stretch.ChangesIn(block.ip, block.end_ip)) {
    return info;  // the whole block at one depth: no need to walk its instructions
  }
  uint64_t ip = block.ip;
  uint32_t previous = info.first_depth;
  for (uint32_t index = 0; index < block.ninsn; ++index) {
    if (index > 0) {
      uint32_t depth = depth_at(ip);
      if (depth != previous) info.steps.push_back(InlineStep{index, depth, ip});
      previous = depth;
    }
    if (ip == block.end_ip) break;
    const uint8_t length = image.InsnLength(block, ip);
    if (length == 0) break;  // undecodable: keep what is known (depth stays as last seen)
    ip += length;
  }
  return info;
}

}  // namespace ptscope::decode
