// FlowDecoder: one decode unit's PT -> its UnitEvents (unit_events.h), with QueryWalker or
// libipt's block decoder (the same blocks and events: see query_walker.h and UseWalker).
//
// A pure stage: what it produces depends on the unit's bytes, the code and the sideband only.
// What depends on the units before (the order of a thread's units, instructions carried across a
// join, triggers, lost-data gaps between pieces, the end of a thread) is the join's (join/).
//
// Blocks end at calls and jumps (end_on_call, end_on_jump); each block's last instruction says
// which FlowEvent it makes, and the next block's first address is that event's target. Its parts:
//   BlockSource       the walker or libipt, whichever decodes the segment
//   UnitClock         the events' times, interpolated between the unit's timing packets
//   InlineStatements  kInlineChange events where the inlined depth changes (with CodeFacts)
//   CpuFollower       per-CPU streams: which thread runs (a run of events per stretch)
// and this class: the block loop, the events, the unit's counts and the stuck check.
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <string>

#include "capture/decoder_setup.h"
#include "events.h"
#include "flow/block_facts.h"
#include "flow/block_source.h"
#include "flow/code_images.h"
#include "flow/cpu_follower.h"
#include "flow/inline_statements.h"
#include "flow/unit_clock.h"
#include "flow/unit_events.h"
#include "work_unit.h"  // PsbState

namespace ptscope::decode {

class FlowDecoder {
 public:
  // Decodes into `out` (which the caller resets), with a worker's cache of facts about code.
  FlowDecoder(const DecoderSetup& setup, const CodeImages& images, uint32_t pid, BlockFacts& facts,
              UnitEvents& out);
  FlowDecoder(const FlowDecoder&) = delete;
  FlowDecoder& operator=(const FlowDecoder&) = delete;

  // With CodeFacts, blocks whose instructions have inlined frames make kInlineChange events at the
  // exact instruction where the inlined depth changes (see inline_statements.h).
  // With CodeFacts, a taken conditional branch into another function makes a kJump event, as an
  // unconditional jump does (glibc's `je __memcpy_erms+0x1d` from __mempcpy_erms).
  void SetCodeFacts(CodeFacts* code) {
    inline_.SetCodeFacts(code);
    code_ = code;
  }
  // Walk code with QueryWalker over libipt's query decoder instead of libipt's block decoder
  // (the same blocks and events, about twice as fast), sharing a worker's cache of decoded code.
  // What the walker does not model makes it stop: walker_refused() then says to decode the same
  // bytes again with a FlowDecoder that uses libipt's block decoder.
  // With `own_packets`, the walker reads packets with our PacketQuery; what that does not model
  // makes it stop too, and packets_refused() says so (then the walker over libipt's query
  // decoder may take the same bytes).
  void UseWalker(WalkerCache* cache, bool own_packets = false) {
    blocks_.UseWalker(cache, own_packets);
  }
  bool walker_refused() const { return blocks_.refused(); }
  bool packets_refused() const { return blocks_.packets_refused(); }
  // Added to libipt's offsets in messages (the unit's offset within its piece).
  void SetOffsetBase(uint64_t base) { offset_base_ = base; }
  // The unit continues the previous unit of a contiguous piece: the inlined depth at its start is
  // not known here, so its first block states it.
  void SetContinuation() { inline_.Unknown(); }
  // The PSB that follows this unit (same piece), whose header the unit's bytes include (see
  // DecodeUnitSpan::decode_end): a branch left without target at the end goes to its FUP.
  void SetNextUnit(const PsbState& next) { next_unit_ = next; }
  // A per-CPU stream: the thread (and address space) follows `cpu`'s schedule (UnitEvents::runs).
  void FollowCpu(const SidebandTimeline* timeline, uint32_t cpu) { cpu_.Follow(timeline, cpu); }
  // --format insns: also lists every instruction of every block (UnitEvents::insns).
  void ListInstructions() { list_insns_ = true; }

  // Decodes the unit's bytes (they must outlive the call only).
  void DecodeSegment(const uint8_t* begin, size_t size);
  // Instead of DecodeSegment: the unit's bytes cannot be had (`detail` says why), which is a
  // decode-error gap where they would have been.
  void FailSegment(std::string detail);

 private:
  struct PendingBranch {
    bool active = false;
    FlowEvent::Kind kind = FlowEvent::Kind::kCall;
    uint64_t from = 0;  // (the last block's end_ip also when not active: HandleBlock sets it)
    uint8_t call_size = 0;
    // A conditional branch ended the last block (never `active`): it makes a kJump only if the
    // next block, its target, lies outside the current function (FlowDecoder::LeavesFunction).
    bool cond = false;
    int isid = 0;  // the branch's section (libipt's; to read it)
  };
  // Damaged trace can leave libipt walking a loop of direct jumps that needs no packets: without
  // a bound the block loop would never end. Real code cannot retire this many instructions
  // without producing a single packet.
  struct StuckCheck {
    uint64_t offset = UINT64_MAX, position = 0;  // the trace offset at the last check, and the
                                                 // position when it last changed
    uint64_t next = 0;                           // the position of the next check
  };
  // The end of DecodeSegment/FailSegment: pending branch, waiting events, the unit's fields.
  void FinishSegment();
  int DrainEvents(int status);
  bool Stuck();
  void HandleEvent(const pt_event& event);
  void HandleBlock(const pt_block& block, uint8_t call_size);
  // After a conditional branch: the walker takes the blocks for which HandleBlock would do nothing
  // but count their instructions and note the last one's end (QueryWalker::NextQuiet). Returns
  // the run the walker stopped at, for NextBlock (QueryWalker::QuietBlocks::next), or nullptr.
  const WalkerRun* TakeQuietBlocks();
  // The length of the call `block` ends with, through BlockFacts::call_lengths; a block whose
  // class libipt did not say (ptic_error) is classified here, into `branch_class`.
  uint8_t CallLengthOf(const pt_block& block, BranchClass* branch_class);
  BranchInsn ClassifyLast(const pt_block& block);
  // The branch instruction at `ip` (in section `isid`), classified once (BlockFacts::branches).
  BranchInsn BranchAt(uint64_t ip, int isid);
  void ListBlock(const pt_block& block);
  void HandleError(int error, const pt_block& block, uint64_t offset);
  void ResolvePending(uint64_t target);
  // The pending conditional branch went to `to`: whether that is outside the current function,
  // the one the last event went to (the stack tracker's top frame's: then it makes a kJump, which
  // the tracker treats as any jump). Updates function_ to the current function's bounds.
  bool LeavesFunction(uint64_t to);
  // CodeFacts::FunctionRange at `ip`, through BlockFacts::functions.
  FunctionBounds FunctionAt(uint64_t ip);
  void Queue(FlowEvent::Kind kind, uint64_t from, uint64_t to);
  void AppendEvent(uint64_t position, FlowEvent::Kind kind, uint64_t from, uint64_t to,
                   uint8_t call_size, uint32_t inline_depth);
  void QueueGap(GapCause cause, uint64_t resume_ip, std::string detail);
  void Anchor(uint64_t tsc);
  void FlushExtrapolated() { clock_.Extrapolate(out_.events, stats_); }
  void UpdateThread(uint64_t time_ns);
  void SwitchImageIfNeeded(uint64_t time_ns);
  // The time the code's mappings are taken at: the last anchor's, else (no time yet) the end of
  // the capture's.
  uint64_t ImageTime() const;

  const DecoderSetup& setup_;
  UnitEvents& out_;
  BlockFacts& facts_;
  ThreadImage image_;
  BlockSource blocks_{image_};
  UnitClock clock_;
  InlineStatements inline_{facts_};
  CpuFollower cpu_;
  StuckCheck stuck_;
  FlowStats stats_;
  PendingBranch pending_;
  CodeFacts* code_ = nullptr;
  // The current function: the one holding last_target_, the target of the last event (0: none
  // yet in this segment), when function_ holds it. A taken conditional branch inside it makes no
  // event and costs two compares more than before.
  FunctionBounds function_;
  uint64_t last_target_ = 0;
  BranchClass last_class_ = BranchClass::kOther;  // (the last block's end is pending_.from)
  uint64_t position_ = 0;            // instructions retired so far
  uint64_t last_event_position_ = 0;
  PsbState next_unit_;
  uint64_t offset_base_ = 0;
  bool list_insns_ = false;
};

}  // namespace ptscope::decode
