// FlowDecoder: kInlineChange events inside blocks (see flow_decoder.h, SetInlineNamer).
//
// A block is contiguous code. The namer knows where the inlined depth changes in the function
// around it (one DWARF walk per function): a block where it does not change needs nothing more;
// otherwise the instructions where it changes are found by walking instruction lengths (Zydis,
// minimal mode). A block inside the function of the block before is answered from that stretch;
// any other is cached by its first address: afterwards it costs one hash look-up and no text.
#include <Zydis/Zydis.h>

#include <algorithm>

#include "flow/flow_decoder.h"
#include "ptscope/symbols.h"

namespace ptscope::decode {
namespace {

constexpr uint32_t kMaxInlineDepth = FlowDecoder::kMaxInlineDepth;

}  // namespace

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

const BlockInline& FlowDecoder::InlineOf(const pt_block& block) {
  const uint32_t pid = image_.pid();
  // Most blocks lie in the function (or the stretch without debug info) of the block before: the
  // stretch answers without a look-up in the (cache-missing) per-block table.
  const InlineDepthStretch& last = block_inline_->stretch;
  if (block_inline_->stretch_pid == pid && last.Contains(block.ip) && last.Contains(block.end_ip) &&
      (last.uniform || !last.ChangesIn(block.ip, block.end_ip))) {
    block_inline_->uniform.first_depth =
        std::min(last.uniform ? last.uniform_depth : last.DepthAt(block.ip), kMaxInlineDepth);
    return block_inline_->uniform;
  }
  auto [found, inserted] = block_inline_->blocks.TryEmplace(BlockInlineKey{pid, block.ip});
  BlockInline& info = *found;
  if (!inserted && info.end_ip == block.end_ip) return info;
  info = BlockInline{};
  info.end_ip = block.end_ip;
  uint64_t time = have_anchor_ ? anchor_ns_ : 0;
  // Depths come from the namer's stretch for the function when it has one (one question per
  // function), else per instruction.
  bool ask_for_stretch = true;
  auto depth_at = [&](uint64_t ip) {
    InlineDepthStretch& stretch = block_inline_->stretch;
    if ((block_inline_->stretch_pid != pid || !stretch.Contains(ip)) && ask_for_stretch) {
      stretch = code_facts_->InlineStretch(pid, ip, time);
      block_inline_->stretch_pid = pid;
      ask_for_stretch = stretch.Contains(ip);  // none here: do not ask again for this block
    }
    uint32_t depth = stretch.Contains(ip) && block_inline_->stretch_pid == pid
                         ? stretch.DepthAt(ip)
                         : code_facts_->InlineDepth(pid, ip, time);
    return std::min(depth, kMaxInlineDepth);
  };
  info.first_depth = depth_at(block.ip);
  const InlineDepthStretch& stretch = block_inline_->stretch;
  if (stretch.Contains(block.ip) && stretch.Contains(block.end_ip) &&
      !stretch.ChangesIn(block.ip, block.end_ip)) {
    return info;  // the whole block at one depth: no need to walk its instructions
  }
  ZydisDecoder zydis;
  ZydisDecoderInit(&zydis, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  ZydisDecoderEnableMode(&zydis, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
  uint64_t ip = block.ip;
  uint32_t previous = info.first_depth;
  for (uint32_t index = 0; index < block.ninsn; ++index) {
    if (index > 0) {
      uint32_t depth = depth_at(ip);
      if (depth != previous) info.steps.push_back(InlineStep{index, depth, ip});
      previous = depth;
    }
    if (ip == block.end_ip) break;
    uint8_t bytes[16];
    int read = pt_iscache_read(image_.iscache(), bytes, sizeof bytes, block.isid, ip);
    if (read <= 0) read = static_cast<int>(image_.ReadJit(bytes, sizeof bytes, ip));
    ZydisDecodedInstruction insn;
    if (read <= 0 || ZYAN_FAILED(ZydisDecoderDecodeInstruction(
                         &zydis, nullptr, bytes, static_cast<ZyanUSize>(read), &insn))) {
      break;  // undecodable: keep what is known (depth stays as last seen)
    }
    ip += insn.length;
  }
  return info;
}

void FlowDecoder::RefreshFastStretch() {
  const InlineDepthStretch& stretch = block_inline_->stretch;
  if (!restate_at_unit_start_ && stretch.uniform && block_inline_->stretch_pid == image_.pid() &&
      stretch.begin < stretch.end) {
    fast_begin_ = stretch.begin;
    fast_end_ = stretch.end;
    fast_depth_ = std::min(stretch.uniform_depth, kMaxInlineDepth);
  } else {
    fast_begin_ = fast_end_ = 0;
  }
}

void FlowDecoder::QueueInlineChanges(const pt_block& block, uint64_t block_position) {
  const BlockInline& info = InlineOf(block);
  bool restate = RestatesDepth(inline_after_transfer_, inline_depth_, info.first_depth);
  inline_after_transfer_ = false;
  const bool unit_start = restate_at_unit_start_;
  restate_at_unit_start_ = false;
  if (restate) {
    if (unit_start && inline_depth_ == kUnknownDepth && buffer_ != nullptr) {
      buffer_->restate_index = buffer_->events.size() + waiting_.size();
      buffer_->restate_depth = info.first_depth;
      buffer_->restate_stretch = {thread_, thread_since_ns_};
    }
    inline_depth_ = info.first_depth;
    QueueAt(block_position, FlowEvent::Kind::kInlineChange, block.ip, block.ip, 0, inline_depth_);
  }
  for (const InlineStep& step : info.steps) {
    inline_depth_ = step.depth;
    QueueAt(block_position + step.index, FlowEvent::Kind::kInlineChange, step.ip, step.ip, 0,
            inline_depth_);
  }
  RefreshFastStretch();  // InlineOf may have moved the stretch; the unit-start flag is cleared
}

}  // namespace ptscope::decode
