// One thread's PT stream -> FlowEvents, with libipt's block decoder or QueryWalker (the same
// blocks and events, faster: see query_walker.h and UseWalker).
//
// Blocks end at calls and jumps (end_on_call, end_on_jump); each block's last instruction says
// which FlowEvent it makes, and the next block's first address is that event's target. Time:
// libipt only knows time at timing packets, so tick events anchor (instruction position, time)
// pairs and every FlowEvent between two anchors gets a time interpolated by instruction count.
// Events therefore wait in a small buffer until the next anchor (no text, no per-event
// allocation beyond the reused buffer).
#pragma once

#include <intel-pt.h>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "flow/code_images.h"
#include "capture/decoder_setup.h"
#include "flow/event_buffer.h"
#include "events.h"
#include "parallel/psb_units.h"
#include "flow/query_walker.h"
#include "capture/sideband_timeline.h"
#include "flat_map.h"
#include "flow/x86_branch.h"

namespace ptscope::decode {

class FlowOutput {
 public:
  virtual ~FlowOutput() = default;
  virtual void OnFlowEvent(const FlowEvent& event) = 0;
};

struct FlowStats {
  uint64_t instructions = 0;
  uint64_t events = 0;
  DecodeStats counts;              // gaps by cause (Stat)
  uint64_t first_ns = UINT64_MAX, last_ns = 0;
  std::string first_error;         // first libipt error, with its stream offset
  // Where code bytes were missing (kMissingCode gaps), each address once, at most 16: which
  // missing modules really ran.
  std::vector<uint64_t> missing_code_ips;
};

struct TriggerMark {
  uint64_t time_ns = 0;
  uint64_t address = 0;
  std::string text;
};

// Hands `out` a kTrigger event for every mark of `triggers` (sorted by time) from *next on that
// is due by `time_ns`, never earlier than `floor_ns` (the thread's last event time).
template <typename Out>
void DeliverDueTriggers(const std::vector<TriggerMark>& triggers, size_t* next, uint64_t time_ns,
                        uint64_t floor_ns, Out&& out) {
  while (*next < triggers.size() && triggers[*next].time_ns <= time_ns) {
    FlowEvent trigger;
    trigger.kind = FlowEvent::Kind::kTrigger;
    trigger.time_ns = std::max(triggers[*next].time_ns, floor_ns);
    trigger.to = triggers[*next].address;
    trigger.detail = triggers[*next].text;
    ++*next;
    out(trigger);
  }
}

// One decode unit's events, kept for the pipeline to stitch to its neighbours (see psb_units.h).
struct UnitEvents {
  struct Run {
    ThreadKey thread;
    size_t first = 0;  // index of the run's first event
  };
  EventBuffer events;
  std::vector<Run> runs;  // which thread each stretch of events belongs to
  FlowStats stats;
  uint64_t last_end_ip = 0;
  // Instructions retired after the last event: a sequential decoder counts them in the next
  // unit's first event (FlowEvent::insn_count).
  uint64_t trailing_insns = 0;
  // When the unit's last instruction ran: its events' time, extrapolated over the trailing
  // instructions at the rate of the last timed interval (0: no time at all).
  uint64_t end_ns = 0;
  void Reset() {  // for reuse: keeps the vectors' capacity
    events.clear();
    runs.clear();
    stats = FlowStats{};
    last_end_ip = trailing_insns = end_ns = 0;
    restate_index = SIZE_MAX;
    restate_depth = end_inline_depth = 0;
    end_after_transfer = end_depth_unknown = false;
    restate_stretch = end_stretch = ThreadStretch{};
  }
  // Inlined-depth bookkeeping across a join (SetContinuation): the unit states the depth of its
  // first instruction at once (event `restate_index`, SIZE_MAX when none); whether a sequential
  // decoder would have stated it too depends on the previous unit's end state, which the
  // pipeline knows (see KeepRestatement).
  size_t restate_index = SIZE_MAX;
  uint32_t restate_depth = 0;
  uint32_t end_inline_depth = 0;
  bool end_after_transfer = false;
  // A thread switched in after the unit's last block: its depth is not known at the end (a
  // sequential decoder states it afresh at the thread's next block, whatever end_inline_depth says).
  bool end_depth_unknown = false;
  // Per-CPU streams: which thread's stretch on the CPU (its switch-in time) the restated event
  // and the unit's end belong to. A restatement continues the previous unit's end state only in
  // the same stretch; a thread switched in states its depth afresh (FlowDecoder::UpdateThread).
  // Per-thread streams leave both empty.
  struct ThreadStretch {
    ThreadKey thread;
    uint64_t since_ns = 0;
    bool operator==(const ThreadStretch&) const = default;
  };
  ThreadStretch restate_stretch, end_stretch;
};

// Whether a block starting at inlined depth `first_depth` restates it (a kInlineChange), after
// code at `current` depth: a change always does, and so does any non-zero depth after a transfer
// (the tracker closes the caller's inlined slices at calls and returns).
// (Bitwise, without a branch: whether an event came since the last block is unpredictable, and
// this runs for every block.)
inline bool RestatesDepth(bool after_transfer, uint32_t current, uint32_t first_depth) {
  const bool either_nonzero = (first_depth | current) != 0;
  const bool changes = first_depth != current;
  return (after_transfer & either_nonzero) | (!after_transfer & changes);
}

// Whether a sequential decode would have emitted `next`'s restated inlined depth, given the end
// state of the unit before it (`previous`, nullptr when there is none).
bool KeepRestatement(const UnitEvents* previous, const UnitEvents& next);

// Per-worker cache of the inlined depths of blocks, shared by the FlowDecoders a worker creates
// one after another (blocks repeat across units). Key: (pid, block start).
struct BlockInlineKey {
  uint32_t pid;
  uint64_t ip;
  bool operator==(const BlockInlineKey&) const = default;
};
// Fibonacci hashing of (pid, address) for FlatMap (which takes the top bits).
struct BlockInlineKeyHash {
  uint64_t operator()(const BlockInlineKey& key) const {
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
  uint64_t end_ip = 0;
  uint32_t first_depth = 0;
  std::vector<InlineStep> steps;  // depth changes after the first instruction
};
// Per-worker caches of facts about code that never change for a (pid, address): the inlined depths
// of a block's instructions, and the length of a call instruction (its return address).
struct BlockInlineCache {
  FlatMap<BlockInlineKey, BlockInline, BlockInlineKeyHash> blocks;
  FlatMap<BlockInlineKey, BranchInsn, BlockInlineKeyHash> branches;
  // The lengths of the call instructions that ended blocks, direct-mapped in front of `branches`:
  // probed for every block (a block that is no call probes slot 0 and ignores it), so that only
  // a miss takes a branch (see FlowDecoder::HandleBlock). Allocated at a decoder's first segment.
  struct CallLength {
    uint64_t end_ip = 0;  // 0: an empty slot (no call ends at address 0)
    uint32_t pid = 0;
    uint8_t size = 0;
  };
  static constexpr unsigned kCallLengthBits = 12;
  static constexpr size_t kCallLengthSlots = size_t{1} << kCallLengthBits;
  std::unique_ptr<CallLength[]> call_lengths;
  // The namer's last answer about a stretch of code: new blocks of the same function need no
  // question to the (locked) namer.
  InlineDepthStretch stretch;
  uint32_t stretch_pid = 0;
  BlockInline uniform;  // InlineOf's answer for a block inside `stretch` at one depth
};

class FlowDecoder {
 public:
  static constexpr uint32_t kMaxInlineDepth = 64;  // deeper inlined chains are cut here
  FlowDecoder(const DecoderSetup& setup, const CodeImages& images, uint32_t pid, FlowOutput& out);
  ~FlowDecoder();
  FlowDecoder(const FlowDecoder&) = delete;
  FlowDecoder& operator=(const FlowDecoder&) = delete;

  // Trigger markers of this thread, sorted by time; emitted in time order among the events.
  void SetTriggers(std::vector<TriggerMark> triggers) { triggers_ = std::move(triggers); }
  // With CodeFacts, blocks whose instructions have inlined frames (CodeFacts::InlineDepth) make
  // kInlineChange events at the exact instruction where the inlined depth changes. Each distinct
  // block is asked about once; blocks without inlined code then cost one cache look-up.
  void SetCodeFacts(CodeFacts* code) { code_facts_ = code; }
  // Decodes one contiguous piece of the stream (bytes must outlive the call only).
  void DecodeSegment(const uint8_t* begin, size_t size);
  // Instead of DecodeSegment: the segment's bytes cannot be had (`detail` says why), which is
  // a decode-error gap where they would have been.
  void FailSegment(std::string detail);

  // Unit mode (parallel decoding). Events go to `buffer` instead of the FlowOutput; the caller
  // stitches units and adds triggers, lost-data gaps and the end.
  void SetUnitBuffer(UnitEvents* buffer) {
    buffer_ = buffer;
    queue_ = &buffer->events;
    first_waiting_ = buffer->events.size();
    waiting_base_ = last_event_position_;
  }
  // The unit continues the previous unit of a contiguous piece: state its inlined depth at once.
  void SetContinuation() {
    inline_depth_ = kUnknownDepth;
    restate_at_unit_start_ = true;
    RefreshFastStretch();
  }
  // The PSB that follows this unit (same piece), whose header the unit's bytes include (see
  // DecodeUnitSpan::decode_end): a branch left without target at the end goes to its FUP, and
  // its TSC anchors the time there.
  void SetNextUnit(const PsbState& next) { next_unit_ = next; }
  // A per-CPU stream: the thread (and address space) follows `cpu`'s schedule, looked up at the
  // sync point and whenever tracing is enabled again. Needs a unit buffer (runs).
  void FollowCpu(const SidebandTimeline* timeline, uint32_t cpu) {
    timeline_ = timeline;
    cpu_ = cpu;
  }
  // Added to libipt's offsets in messages (the unit's offset within its piece).
  void SetOffsetBase(uint64_t base) { offset_base_ = base; }
  // Walk code with QueryWalker over libipt's query decoder instead of libipt's block decoder
  // (the same blocks and events, about twice as fast), sharing a worker's cache of decoded code.
  // What the walker does not model makes it stop: walker_refused() then says to decode the same
  // bytes again with a FlowDecoder that uses libipt's block decoder.
  void UseWalker(WalkerCache* cache) { walker_cache_ = cache; }
  bool walker_refused() const { return walker_refused_; }
  // Share a worker's cache of blocks' inlined depths (default: the decoder's own).
  void SetBlockInlineCache(BlockInlineCache* cache) {
    block_inline_ = cache;
    RefreshFastStretch();
  }
  // Data was lost before the next segment.
  void LostData(const std::string& detail);
  // Ends the thread: flushes waiting events and emits kEnd.
  void Finish();
  const FlowStats& stats() const { return stats_; }

 private:
  struct PendingBranch {
    bool active = false;
    FlowEvent::Kind kind = FlowEvent::Kind::kCall;
    uint64_t from = 0;
    uint8_t call_size = 0;
  };
  // The end of DecodeSegment/FailSegment: pending branch, waiting events, unit-buffer fields.
  void FinishSegment();
  // libipt's block decoder or the walker, whichever decodes the segment. A walker's refusal reads
  // as the end of the trace (walker_refused_ says which it was).
  bool Decoding() const { return decoder_ != nullptr || walker_ != nullptr; }
  int Refused(int status) {
    if (status != QueryWalker::kUnsupported) return status;
    walker_refused_ = true;
    return -pte_eos;
  }
  int SyncForward() { return walker_ ? Refused(walker_->SyncForward()) : pt_blk_sync_forward(decoder_); }
  int SyncSet(uint64_t offset) {
    return walker_ ? Refused(walker_->SyncSet(offset)) : pt_blk_sync_set(decoder_, offset);
  }
  int NextBlock(pt_block* block) {
    return walker_ ? Refused(walker_->Next(block)) : pt_blk_next(decoder_, block, sizeof *block);
  }
  int NextEvent(pt_event* event) {
    return walker_ ? Refused(walker_->Event(event)) : pt_blk_event(decoder_, event, sizeof *event);
  }
  int Time(uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) const {
    return walker_ ? walker_->Time(tsc, lost_mtc, lost_cyc)
                   : pt_blk_time(decoder_, tsc, lost_mtc, lost_cyc);
  }
  int Offset(uint64_t* offset) const {
    return walker_ ? walker_->GetOffset(offset) : pt_blk_get_offset(decoder_, offset);
  }
  int SyncOffset(uint64_t* offset) const {
    return walker_ ? walker_->GetSyncOffset(offset) : pt_blk_get_sync_offset(decoder_, offset);
  }
  int DrainEvents(int status);
  bool StuckCheck();  // every 64 blocks: has libipt consumed any trace since the last check?
  void HandleEvent(const pt_event& event);
  void HandleBlock(const pt_block& block);
  BranchInsn ClassifyLast(const pt_block& block);
  void HandleError(int error, const pt_block& block, uint64_t offset);
  void ResolvePending(uint64_t target);
  void Queue(FlowEvent::Kind kind, uint64_t from, uint64_t to, uint8_t call_size = 0);
  void QueueAt(uint64_t position, FlowEvent::Kind kind, uint64_t from, uint64_t to,
               uint8_t call_size, uint32_t inline_depth);
  void AppendEvent(uint64_t position, FlowEvent::Kind kind, uint64_t from, uint64_t to,
                   uint8_t call_size, uint32_t inline_depth);  // QueueAt's body (flow_decoder.cpp)
  const BlockInline& InlineOf(const pt_block& block);
  // Unit mode: see SetNextUnit.
  void JoinNextUnit();
  void UpdateThread(uint64_t time_ns);
  static constexpr uint32_t kUnknownDepth = UINT32_MAX;
  void QueueInlineChanges(const pt_block& block, uint64_t block_position);
  // Sets fast_begin_/fast_end_/fast_depth_ from the shared stretch, the pid and the unit-start
  // flag; called wherever one of them changes.
  void RefreshFastStretch();
  void QueueGap(GapCause cause, uint64_t resume_ip, std::string detail);
  void Anchor(uint64_t tsc);
  void FlushExtrapolated();
  // Gives every waiting event the time `time_of(its position)` (clamped to never go back) and
  // emits it, then clears the waiting list.
  template <typename TimeOf>
  void EmitWaiting(const TimeOf& time_of);
  void Emit(FlowEvent& event, uint64_t time_ns);
  // Events waiting for their time: in the unit buffer from first_waiting_ on (unit mode), else
  // in waiting_.
  size_t WaitingCount() const;
  void ClearWaiting();
  void SwitchImageIfNeeded(uint64_t time_ns);

  const DecoderSetup& setup_;
  FlowOutput& out_;
  ThreadImage image_;
  pt_block_decoder* decoder_ = nullptr;  // of the segment being decoded (libipt's)
  std::unique_ptr<QueryWalker> walker_;  // of the segment being decoded (the walker)
  ThreadImageCode walker_code_{image_};
  WalkerCache* walker_cache_ = nullptr;  // non-null: decode with the walker
  bool walker_refused_ = false;
  FlowStats stats_;
  PendingBranch pending_;
  BranchClass last_class_ = BranchClass::kOther;
  uint64_t last_end_ip_ = 0;
  uint64_t position_ = 0;            // instructions retired so far
  uint64_t last_event_position_ = 0;
  // Interpolation state.
  EventBuffer waiting_;
  // The position of the last event before the waiting ones: a waiting event's position is this
  // plus the insn_count of the waiting events up to and including it (QueueAt sets insn_count
  // from positions), so no position needs storing per event.
  uint64_t waiting_base_ = 0;
  bool have_anchor_ = false;
  uint64_t anchor_ns_ = 0, anchor_position_ = 0;
  uint64_t rate_ns_ = 0, rate_insns_ = 0;  // ns per instruction of the last anchored interval
  uint64_t last_emitted_ns_ = 0;
  // Stuck-decoder check (StuckCheck): the trace offset at the last check, the position when it
  // last changed, and the position of the next check.
  uint64_t stuck_offset_ = UINT64_MAX, stuck_position_ = 0, next_stuck_check_ = 0;
  std::vector<TriggerMark> triggers_;
  CodeFacts* code_facts_ = nullptr;
  uint32_t inline_depth_ = 0;  // inlined depth at the last instruction
  // HandleBlock's common case in a few instructions: code in [fast_begin_, fast_end_) is all at
  // inlined depth fast_depth_ (block_inline_->stretch when it is uniform, for this pid, and no
  // unit-start restatement is due; else empty).
  uint64_t fast_begin_ = 0, fast_end_ = 0;
  uint32_t fast_depth_ = 0;
  // An event other than kInlineChange came since the last block: the stack tracker's top frame
  // may have changed, so the next block re-states any non-zero depth on either side.
  bool inline_after_transfer_ = false;
  BlockInlineCache own_block_inline_;
  BlockInlineCache* block_inline_ = &own_block_inline_;
  size_t next_trigger_ = 0;
  // Unit mode.
  UnitEvents* buffer_ = nullptr;
  EventBuffer* queue_ = &waiting_;  // where events are queued: &buffer_->events, else &waiting_
  size_t first_waiting_ = 0;  // unit mode: events from here on have no time yet
  PsbState next_unit_;
  const SidebandTimeline* timeline_ = nullptr;
  uint32_t cpu_ = 0;
  bool have_thread_ = false;
  ThreadKey thread_;
  bool restate_at_unit_start_ = false;  // the next restatement is the unit-start one
  uint64_t thread_since_ns_ = 0;  // when thread_'s stretch on this CPU began (its switch-in)
  bool switched_in_ = false;      // a switch-in made inline_depth_ unknown (see UnitEvents)
  uint64_t offset_base_ = 0;
};

}  // namespace ptscope::decode
