// FlowDecoder: kInlineChange events inside blocks (see flow_decoder.h, SetInlineNamer).
//
// A block is contiguous code, so the instruction where the inlined depth changes is found by
// walking instruction lengths (Zydis, minimal mode) once per distinct block; the result is cached
// by the block's first address. Blocks without inlined code keep an empty entry: afterwards they
// cost one hash look-up and no text.
#include <Zydis/Zydis.h>

#include <algorithm>

#include "flow_decoder.h"

namespace ptscope::decode {
namespace {

constexpr uint32_t kMaxInlineDepth = 64;

}  // namespace

const BlockInline& FlowDecoder::InlineOf(const pt_block& block) {
  auto [found, inserted] = block_inline_->blocks.TryEmplace(BlockInlineKey{image_.pid(), block.ip});
  BlockInline& info = *found;
  if (!inserted && info.end_ip == block.end_ip) return info;
  info = BlockInline{};
  info.end_ip = block.end_ip;
  ZydisDecoder zydis;
  ZydisDecoderInit(&zydis, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  ZydisDecoderEnableMode(&zydis, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
  uint64_t time = have_anchor_ ? anchor_ns_ : 0;
  uint64_t ip = block.ip;
  uint32_t previous = 0;
  for (uint32_t index = 0; index < block.ninsn; ++index) {
    uint32_t depth = std::min(inline_namer_->InlineDepth(image_.pid(), ip, time), kMaxInlineDepth);
    if (index == 0) {
      info.first_depth = depth;
    } else if (depth != previous) {
      info.steps.push_back(InlineStep{index, depth, ip});
    }
    previous = depth;
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

void FlowDecoder::QueueInlineChanges(const pt_block& block, uint64_t block_position) {
  const BlockInline& info = InlineOf(block);
  bool restate = inline_after_transfer_ ? info.first_depth != 0 || inline_depth_ != 0
                                        : info.first_depth != inline_depth_;
  inline_after_transfer_ = false;
  const bool unit_start = restate_at_unit_start_;
  restate_at_unit_start_ = false;
  if (restate) {
    if (unit_start && inline_depth_ == kUnknownDepth && buffer_ != nullptr) {
      buffer_->restate_index = buffer_->events.size() + waiting_.size();
      buffer_->restate_depth = info.first_depth;
    }
    inline_depth_ = info.first_depth;
    QueueAt(block_position, FlowEvent::Kind::kInlineChange, block.ip, block.ip, 0, inline_depth_);
  }
  for (const InlineStep& step : info.steps) {
    inline_depth_ = step.depth;
    QueueAt(block_position + step.index, FlowEvent::Kind::kInlineChange, step.ip, step.ip, 0,
            inline_depth_);
  }
}

}  // namespace ptscope::decode
