// One thread's PT stream -> FlowEvents, with libipt's block decoder.
//
// Blocks end at calls and jumps (end_on_call, end_on_jump); each block's last instruction says
// which FlowEvent it makes, and the next block's first address is that event's target. Time:
// libipt only knows time at timing packets, so tick events anchor (instruction position, time)
// pairs and every FlowEvent between two anchors gets a time interpolated by instruction count.
// Events therefore wait in a small buffer until the next anchor (no text, no per-event
// allocation beyond the reused buffer).
#pragma once

#include <intel-pt.h>

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "code_images.h"
#include "decoder_setup.h"
#include "events.h"
#include "x86_branch.h"

namespace ptscope::decode {

class FlowOutput {
 public:
  virtual ~FlowOutput() = default;
  virtual void OnFlowEvent(const FlowEvent& event) = 0;
};

struct FlowStats {
  uint64_t instructions = 0;
  uint64_t events = 0;
  std::array<uint64_t, 5> gaps{};  // by GapCause
  uint64_t first_ns = UINT64_MAX, last_ns = 0;
  std::string first_error;         // first libipt error, with its stream offset
};

struct TriggerMark {
  uint64_t time_ns = 0;
  uint64_t address = 0;
  std::string text;
};

class FlowDecoder {
 public:
  FlowDecoder(const DecoderSetup& setup, const CodeImages& images, uint32_t pid, FlowOutput& out);
  ~FlowDecoder();
  FlowDecoder(const FlowDecoder&) = delete;
  FlowDecoder& operator=(const FlowDecoder&) = delete;

  // Trigger markers of this thread, sorted by time; emitted in time order among the events.
  void SetTriggers(std::vector<TriggerMark> triggers) { triggers_ = std::move(triggers); }
  // With a namer, blocks whose instructions have inlined frames (FrameName::inlined) make
  // kInlineChange events at the exact instruction where the inlined depth changes. Each distinct
  // block is symbolized once; blocks without inlined code then cost one cache look-up.
  void SetInlineNamer(FrameNamer* namer) { inline_namer_ = namer; }
  // Decodes one contiguous piece of the stream (bytes must outlive the call only).
  void DecodeSegment(const uint8_t* begin, size_t size);
  // Data was lost before the next segment.
  void LostData(const std::string& detail);
  // Ends the thread: flushes waiting events and emits kEnd.
  void Finish();
  const FlowStats& stats() const { return stats_; }

 private:
  struct PendingBranch {
    bool active = false;
    FlowEvent::Kind kind = FlowEvent::Kind::kCall;
    uint64_t from = 0, return_ip = 0;
  };
  int DrainEvents(pt_block_decoder* decoder, int status);
  bool Stuck(uint32_t ninsn);
  void HandleEvent(const pt_event& event);
  void HandleBlock(const pt_block& block);
  BranchInsn ClassifyLast(const pt_block& block) const;
  void HandleError(int error, const pt_block& block, uint64_t offset);
  void ResolvePending(uint64_t target);
  void Queue(FlowEvent::Kind kind, uint64_t from, uint64_t to, uint64_t return_ip = 0);
  void QueueAt(uint64_t position, FlowEvent::Kind kind, uint64_t from, uint64_t to,
               uint64_t return_ip, uint32_t inline_depth);
  // Inlined depth of each instruction of a block (cached per block start).
  struct InlineStep {
    uint32_t index = 0;  // instruction index in the block
    uint32_t depth = 0;
    uint64_t ip = 0;
  };
  struct BlockInline {
    uint64_t end_ip = 0;
    uint32_t first_depth = 0;
    std::vector<InlineStep> steps;  // depth changes after the first instruction
  };
  const BlockInline& InlineOf(const pt_block& block);
  void QueueInlineChanges(const pt_block& block, uint64_t block_position);
  void QueueGap(GapCause cause, uint64_t resume_ip, std::string detail);
  void Anchor(uint64_t tsc);
  void FlushExtrapolated();
  void Emit(FlowEvent& event, uint64_t time_ns);
  void SwitchImageIfNeeded(uint64_t time_ns);

  const DecoderSetup& setup_;
  FlowOutput& out_;
  ThreadImage image_;
  pt_block_decoder* decoder_ = nullptr;  // of the segment being decoded
  FlowStats stats_;
  PendingBranch pending_;
  BranchClass last_class_ = BranchClass::kOther;
  uint64_t last_end_ip_ = 0;
  uint64_t position_ = 0;            // instructions retired so far
  uint64_t last_event_position_ = 0;
  // Interpolation state.
  std::vector<FlowEvent> waiting_;
  std::vector<uint64_t> waiting_position_;
  bool have_anchor_ = false;
  uint64_t anchor_ns_ = 0, anchor_position_ = 0;
  uint64_t rate_ns_ = 0, rate_insns_ = 0;  // ns per instruction of the last anchored interval
  uint64_t last_emitted_ns_ = 0;
  uint64_t stuck_offset_ = UINT64_MAX, stuck_insns_ = 0;
  std::vector<TriggerMark> triggers_;
  FrameNamer* inline_namer_ = nullptr;
  uint32_t inline_depth_ = 0;  // inlined depth at the last instruction
  // An event other than kInlineChange came since the last block: the stack tracker's top frame
  // may have changed, so the next block re-states any non-zero depth on either side.
  bool inline_after_transfer_ = false;
  std::unordered_map<uint64_t, BlockInline> block_inline_;
  size_t next_trigger_ = 0;
};

}  // namespace ptscope::decode
