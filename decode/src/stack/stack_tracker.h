// StackTracker: turns one thread's FlowEvents into properly nested slices on a SliceSink.
//
// Rules (DESIGN.md "Stack reconstruction"):
// - kCall pushes a frame remembering its return address; kReturn pops. A return whose target is
//   not the top frame's return address unwinds to the nearest deeper frame it matches (a frame
//   whose return address is the target, or whose function contains it: longjmp, exceptions) and
//   otherwise re-anchors: everything closes and the target's function starts as an inferred frame.
// - kJump to another function's entry is a tail call (the top frame is replaced, keeping its
//   return address). A jump into the middle of a function deeper in the stack unwinds to it
//   (longjmp); into the middle of any other function it replaces the top (e.g. foo -> foo.cold).
//   Jumps inside the current function do nothing.
// - Returns above the first traced frame reveal callers: each caller becomes an inferred frame that
//   starts at the anchor (trace start, last gap, or see buffering below) and wraps everything
//   traced since. The first event of a stream also creates an inferred frame for the function it
//   happens in.
// - kSyscall opens `[syscall]` and kDisable `[untraced]`, both closed by the next kEnable (and by any
//   other control-flow event, should the kEnable be missing). kEnable at an address that is the
//   return address of an open frame (untraced callee returned, sigreturn) unwinds to it, unless
//   tracing stopped right there without a branch (an asynchronous kDisable: a preempted thread
//   resuming; in a recursion that ip is also the running frame's own return address). A
//   kDisable with a target (a return leaving traced code) still lands there.
// - kAsync nests the handler under the interrupted frame; the handler frame's "return address" is
//   the interrupted ip, so a return (or resumption after sigreturn) there closes it. If the handler
//   returns elsewhere (the signal trampoline), the trampoline takes its place until resumption.
//   With user-only tracing a signal shows as [syscall]/[untraced] followed by kEnable at the entry
//   of a function: that function is treated as a handler resuming where the kSyscall/kDisable
//   said (`to`; when 0: the syscall's next instruction, from + 2, or the kDisable's `from`).
// - A call from outside the top frame's function means a transfer was missed (e.g. a tail call by
//   conditional jump): the top frame is replaced by the caller's function, marked inferred.
// - kGap closes everything at the gap time, leaves an instant naming the cause, and restarts
//   inference after it; kTrigger leaves an instant; kEnd and Finish close everything.
// - Inlined functions: kInlineChange (from the FlowDecoder, at the exact instruction) sets how many
//   inlined slices (FrameId::Kind::kInlined, address = where the level was entered) are open inside
//   the top function frame; they nest between the function and its callees and close when the
//   depth drops, when the frame returns or is replaced, and at gaps. Without kInlineChange (the
//   top frame has none open), a call's inlined call-site frames (CodeFacts::InlineDepth of the call
//   instruction) become slices wrapping the callee, opening and closing with it.
//
// Buffering: an inferred caller must begin before slices that were already begun, and sinks need
// non-decreasing timestamps. So a thread's slice events are buffered from its anchor until they can
// no longer change: at a gap, kEnd, Finish, a re-anchor, or when the buffer holds
// options.max_buffered_events records. Past that bound the buffer is written out; callers found
// later then start at the time the last written-out frame closed (not at the trace start), so they
// no longer wrap what was written. Memory per thread is bounded by max_buffered_events records,
// and with a RecordSpill (options.spill) by its block of records: each full block goes to the
// RecordSpill, which keeps it as it is, or encoded (3 to 4 bytes a record instead of 32), in
// memory up to its byte budgets, past them in a temporary file; the blocks come back, in order,
// at the flush (record_spill.h). The output is the same.
// Once a frame written out is still open (written_open_ > 0: after a flush at the bound), no
// inferred caller can wrap what is buffered any more: the stack must first empty, and the last
// written frame's close flushes (NoteClosed), so a caller found later starts after it. A tracker
// that is its sink's only writer while it runs (options.sole_writer: a per-thread stream's,
// whose threads are fed one after another) then holds back only options.settled_records
// records instead of the bound's: the same records in the same order, read back from cache
// instead of memory (or the RecordSpill's file). Where several trackers share a sink at once (a
// per-CPU capture's threads), when each writes decides how their packets interleave in the
// output, so they keep to the bound and the output stays what it was.
// A sole writer's thread whose first event is at its program's entry point (CodeFacts::
// IsProgramEntry: a process traced from its exec) has no caller to infer: its bottom frame is
// written out as soon as it is open, and it is settled from the start. (Were that frame to
// return all the same, its caller would start there, as after a flush at the bound.)
//
// Depth: nesting is capped at options.max_depth emitted levels; deeper frames are tracked (so
// returns stay correct) but not emitted, and when the stack comes back an instant says how many
// levels were folded. Not for a sink that WantsEveryLevel() (the summary counts every call).
//
// Output: records reach the sink in runs (SliceSink::WriteRecords), each carrying the thread's
// retired-instruction count (the sum of FlowEvent::insn_count) at that point. The buffer holds
// SliceRecords: when the depth cap changes nothing in it (tracked as records are added), it is
// handed to the sink as it is, without a copy.
//
// Time: event times are clamped to be non-decreasing.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "events.h"
#include "flat_map.h"
#include "stack/record_spill.h"
#include "stack/slot_stack.h"

namespace ptscope::decode {

struct StackTrackerOptions {
  uint32_t max_depth = 500;                 // emitted nesting levels (Perfetto caps at 512)
  size_t max_buffered_events = 1u << 20;    // slice records held back for inferred callers
  bool inlined_frames = true;               // symbolize call sites for inlined frames
  RecordSpill* spill = nullptr;             // where held-back records past a block wait
  bool sole_writer = false;                 // no other tracker writes to the sink meanwhile
  // What a sole writer holds back once nothing buffered can be wrapped: 128 KiB of records, so
  // a flush's few fixed costs are small beside them and they are still in L2 when the sink
  // reads them.
  size_t settled_records = 4096;
};

class StackTracker {
 private:
  enum class FrameType : uint8_t { kFunction, kSynthetic, kAsyncHandler };

 public:
  struct Frame {
    FrameId id;
    uint64_t function_start = 0;  // 0 when unknown
    uint64_t return_ip = 0;       // 0 when unknown (inferred bottom frame)
    uint64_t resume_ip = 0;       // synthetic frames: where the traced code will resume
    FrameType type = FrameType::kFunction;
    uint16_t inlined_wrappers = 0;  // inlined slices opened just before this frame
    uint16_t inline_open = 0;       // inlined slices open inside this frame (kInlineChange)
    // Synthetic frames: tracing stopped at resume_ip itself (an asynchronous kDisable: no branch
    // left, the thread was preempted there), not at a branch's target.
    bool stopped_in_place = false;
    // The last byte, set like every other: a new frame is then zeroed by whole 16-byte stores
    // (with it left as padding, GCC zeroes bytes 31-46 with one store, and OnReturn's 8-byte
    // load of bytes 40-47 just after an OnCall cannot take its data from the store buffer: a
    // store-forwarding stall on half of OnReturn's samples, perf annotate on synth-100M).
    uint8_t reserved = 0;
    bool operator==(const Frame&) const = default;
  };
  static_assert(sizeof(Frame) == 48);
  // What a worker's speculative tracker made of one unit (stack/unit_speculation.h says how it
  // is made and how the join reconciles it).
  struct Speculation {
    // Per event of the unit: where its records end in `records`, and the unit's own frames
    // (above the incoming stack) after it and at their fewest during it.
    struct Event {
      uint32_t records_end = 0;
      uint32_t local_after = 0;
      uint32_t local_min = 0;
      uint32_t touch = UINT32_MAX;  // index in `touches` when the event reached below the unit
    };
    // An event that reached the incoming stack: the join runs it on the real tracker, then
    // checks that the unit's frames it left equal the speculation's.
    struct Touch {
      uint32_t before_first = 0, before_count = 0;  // local frames before it, in `frames`
      uint32_t after_first = 0, after_count = 0;    // and after it
      DecodeStats stats;  // the counts of the events before it that were not touches
    };
    bool valid = false;
    uint64_t first_insn_count = 0;  // the first event's, as the worker saw it (before the join)
    uint64_t first_time_ns = 0;
    std::vector<Event> events;
    std::vector<SliceRecord> records;
    std::vector<Touch> touches;
    std::vector<Frame> frames;
    std::vector<Frame> final_frames;  // the unit's frames open at its end
    DecodeStats stats;                // the counts of all its events that were not touches
    void Clear() {
      valid = false;
      events.clear();
      records.clear();
      touches.clear();
      frames.clear();
      final_frames.clear();
      stats = {};
    }
  };

  StackTracker(ThreadKey thread, CodeFacts& code, SliceSink& sink,
               StackTrackerOptions options = {});
  StackTracker(const StackTracker&) = delete;
  StackTracker& operator=(const StackTracker&) = delete;

  void OnEvent(const FlowEvent& event);  // inline (below)
  // Closes everything still open at max(end_time_ns, last event time) and writes the buffer.
  void Finish(uint64_t end_time_ns);

  // Its reconstruction counts (Stat::kCalls ... kClampedTimes); gaps are counted by the decoder.
  const DecodeStats& stats() const { return stats_; }

  // Speculation, on a worker (a tracker of its own, reused for the units of one process): the
  // unit's events from an unknown incoming stack into `out` (cleared first). Times are clamped
  // within the unit, as ThreadFeed clamps them.
  void Speculate(std::span<const FlowEvent> events, Speculation& out);
  // Reconciliation, on the join's tracker: AdoptEvent(e, j) instead of OnEvent(e) for each
  // event j of the unit `spec` was made from, between BeginAdopt and EndAdopt. `first_insn_count`
  // is the unit's first event's count as delivered (with the instructions the join carried into
  // it). The event times must be those the worker saw (ThreadFeed checks: no clamp across units).
  // The result is exactly OnEvent's; where the speculation's assumption about the incoming stack
  // fails, the unit goes through OnEvent until a touch leaves the frames the worker has.
  // EndAdopt: whether no assumption failed.
  void BeginAdopt(const Speculation& spec, uint64_t first_insn_count);
  void AdoptEvent(const FlowEvent& e, size_t index);
  bool EndAdopt();
  // Events of reconciled units copied from the workers, and those run here (touches, and the
  // events after a wrong guess until the join's stack and the worker's agree again).
  std::pair<uint64_t, uint64_t> adopted_events() const { return adopted_events_; }

 private:
  // Buffered as the sink takes it (instructions = position_ when the record was made), so that
  // Flush can hand buffer_ over without converting it. A kEnd keeps the closed frame's id.
  using Record = SliceRecord;
  using RecordType = SliceRecord::Type;

  // OnEvent only times the event and hands it on to its handler. Both are inline (below the
  // class), so that ThreadFeed's loop calls the handler itself: one call per event, not a call
  // of OnEvent, its jump through Dispatch's table and another jump on to the handler. The
  // handlers stay out of line (noinline): the loop keeps its registers across one call.
  void Dispatch(const FlowEvent& e, uint64_t t);
  [[gnu::noinline]] void FlushAtBoundThenDispatch(const FlowEvent& e, uint64_t t);
  // Between events, once buffer_size_ reached flush_at_: a flush at the bound, a settled one,
  // or the write-out of a program entry's bottom frame (Buffering, above).
  void FlushBetweenEvents();
  // At the thread's first event: whether it starts at its program's entry point.
  [[gnu::noinline]] void CheckProgramEntry(const FlowEvent& e);
  // OnCall, OnReturn and OnJump handle the common case (a known call site calling its usual callee; a
  // return to the top frame's return address) without a call of their own, so that they save no
  // registers; anything else goes on (a tail call) to the general handler (OnCallSlow ...), which
  // does exactly what it would have done.
  [[gnu::noinline]] void OnCall(const FlowEvent& e, uint64_t t);
  [[gnu::noinline]] void OnCallSlow(const FlowEvent& e, uint64_t t);
  [[gnu::noinline]] void OnReturn(const FlowEvent& e, uint64_t t);
  [[gnu::noinline]] void OnReturnSlow(const FlowEvent& e, uint64_t t);
  [[gnu::noinline]] void OnJump(const FlowEvent& e, uint64_t t);  // and OnJumpSlow likewise
  [[gnu::noinline]] void OnJumpSlow(const FlowEvent& e, uint64_t t);
  [[gnu::noinline]] void OnLeave(const FlowEvent& e, uint64_t t);  // kSyscall, kDisable
  [[gnu::noinline]] void OnTrigger(const FlowEvent& e, uint64_t t);
  [[gnu::noinline]] void OnEnd(uint64_t t);
  [[gnu::noinline]] void OnEnable(const FlowEvent& e, uint64_t t);
  [[gnu::noinline]] void OnAsync(const FlowEvent& e, uint64_t t);
  [[gnu::noinline]] void OnGap(const FlowEvent& e, uint64_t t);
  [[gnu::noinline]] void OnInlineChange(const FlowEvent& e, uint64_t t);
  // Closes the inlined slices open inside the top frame.
  void CloseInlineOfTop(uint64_t t);

  // Speculation (unit_speculation.cpp).
  bool MayTouch(const FlowEvent& e, size_t size);
  void DispatchOutOfLine(const FlowEvent& e, uint64_t t);
  void AddAdoptedStats(const DecodeStats& upto);

  // Pushes an inferred frame for the function containing `ip` when the stack is empty.
  void EnsureCurrent(uint64_t ip);
  // With an empty stack: the function containing `ip` becomes the inferred bottom frame, starting
  // at the anchor and wrapping everything buffered.
  void PushInferredBottom(uint64_t ip);
  void Push(const Frame& frame, uint64_t t, bool inferred);
  void Pop(uint64_t t);
  // Pop's body, inlined into the common return (Pop itself stays a call elsewhere).
  [[gnu::always_inline]] void PopInline(uint64_t t);
  // After a return: closes the top frame's inlined slices deeper than the depth at `ip`.
  void CloseInlineDeeperThan(uint64_t ip, uint64_t t);
  void PopTo(size_t new_size, uint64_t t);
  // Replaces the top frame by the function at `ip` (tail call), keeping its return address.
  void ReplaceTop(uint64_t ip, uint64_t start, uint64_t t, bool inferred);
  // Bookkeeping after a frame left the stack: written-out frames and the anchor.
  void NoteClosed();
  void CloseSyntheticTop(uint64_t t);
  void CloseAll(uint64_t t);
  // How many frames stay open after a transfer to `to` (start of its function: `to_start`):
  // frame i whose return address is `to` closes with everything above it; frame i (below the
  // top) whose function is `to_start` stays as the new top. Nearest to the top wins.
  // Returns (size_t)-1 when nothing matches.
  size_t FindLandingFrame(uint64_t to, uint64_t to_start, bool by_return_ip_only) const;

  // What CodeFacts say about an address, asked once per address.
  struct AddressFacts {
    uint64_t start = 0;          // CodeFacts::FunctionStart
    uint32_t inline_depth = 0;   // CodeFacts::InlineDepth (call sites), capped at 64
    bool has_start = false;
    bool has_inline_depth = false;
    // A call site that OnCall's common case may take (set by OnCallSlow): has_start, a callee,
    // and no inlined call-site slices to open (inline depth 0, or inlined frames off). One test
    // instead of three per call; only ever set for good (these facts never change).
    bool fast_call = false;
    uint64_t callee = 0;         // a call site: the target of its last call (0: none yet)
    uint64_t callee_start = 0;   // StartOf(callee)
  };
  // Valid until the next FactsOf of a new address.
  AddressFacts& FactsOf(uint64_t ip);
  uint64_t StartOf(uint64_t ip);
  uint64_t StartOf(AddressFacts& facts, uint64_t ip);
  FrameId FunctionFrame(uint64_t ip, uint64_t start) const;
  uint32_t InlineDepthOf(AddressFacts& facts, uint64_t call_site);
  // CodeFacts::InlineDepth, from the stretch (CodeFacts::InlineStretch) around `call_site` when it is uniform.
  uint32_t CallSiteDepth(uint64_t call_site);

  void Emit(RecordType type, uint64_t t, const FrameId& frame, bool inferred,
            const std::string* text = nullptr);
  // Emit into a slot known to exist (buffer_size_ < buffer_slots_).
  [[gnu::always_inline]] void EmitInSlot(RecordType type, uint64_t t, const FrameId& frame,
                                         bool inferred, const std::string* text = nullptr);
  void AddInstant(uint64_t t, std::string text);
  void Flush();
  // Hands out(records, count) the held-back records in order: the spilled blocks (decoded in
  // runs of kBatchSize), then buffer_. The spilled blocks stay until ReleaseHeld: a record's
  // text points into its block's table, and Write may queue it in batch_ past the block.
  template <typename Out>
  void ForEachHeld(Out&& out);
  void ReleaseHeld();
  void GrowBuffer();
  // Moves buffer_'s whole blocks to the RecordSpill (which always takes them).
  void SpillBuffer();
  // How many records are held back before a flush: options_.max_buffered_events, or once
  // nothing buffered can be wrapped any more (Buffering, above) options_.settled_records.
  size_t HoldBackLimit() const;
  // Whether this sole writer has a written-out frame open (nothing buffered can be wrapped).
  bool Settled() const { return options_.sole_writer && written_open_ > 0; }
  // Whether writing buffer_ (after the inferred prefix) would neither fold nor drop a record.
  bool BufferPassesDepthCap() const;
  // Applies the depth cap and queues the record for the sink.
  void Write(const Record& r);
  void AddToBatch(SliceRecord::Type type, const Record& r, const std::string* text);
  void SendBatch();

  ThreadKey thread_;
  CodeFacts& code_;
  SliceSink& sink_;
  StackTrackerOptions options_;
  DecodeStats stats_;

  SlotStack<Frame> stack_;
  uint64_t last_time_ = 0;
  uint64_t anchor_time_ = 0;     // where inferred bottom frames start
  uint64_t position_ = 0;        // instructions retired so far (sum of FlowEvent::insn_count)
  uint64_t anchor_position_ = 0; // position_ at the anchor
  bool anchored_ = false;        // anchor_time_ is set (first event seen)
  // The thread started at its program's entry point and its bottom frame is not yet written out
  // (flush_at_ is 0 meanwhile: every event asks FlushBetweenEvents).
  bool entry_pending_ = false;
  size_t written_open_ = 0;      // bottom frames whose Begin was already written to the sink

  // The buffered records are buffer_[0, buffer_size_): Emit fills slots that already exist
  // (GrowBuffer makes more), so that the hot path has no vector growth check to call.
  std::vector<Record> buffer_;
  size_t buffer_size_ = 0;
  size_t buffer_slots_ = 0;  // buffer_.size(), which would cost a division by sizeof(Record)
  // Held-back records before buffer_, in the RecordSpill (options_.spill), oldest first.
  std::vector<int64_t> spilled_blocks_;
  size_t spilled_ = 0;       // records in them
  size_t flush_at_ = 0;      // buffer_size_ at which the bound is reached (after spilled_)
  RecordSpill::Reader spill_reader_;
  std::vector<Record> spill_scratch_;  // a run of a block decoded
  std::vector<Record> inferred_prefix_;  // Begins that precede buffer_, innermost first
  std::deque<std::string> texts_;  // the instants' texts in buffer_ (a deque: they never move)
  // Nesting across buffer_ (Begin +1, End -1) relative to its start: now, highest and lowest.
  int64_t buffer_depth_ = 0;
  int64_t buffer_depth_max_ = 0;
  int64_t buffer_depth_min_ = 0;
  // Records on their way to the sink (SliceSink::WriteRecords), sent in runs of kBatchSize.
  std::vector<SliceRecord> batch_;
  std::vector<std::string> batch_texts_;  // a "[folded] ..." note (sent at once)

  // Speculation (a worker's tracker): its stack starts with a sentinel standing for the incoming
  // stack; an event that pops it, scans past it or runs with nothing above it "touched" it.
  bool speculating_ = false;
  mutable bool touched_ = false;  // FindLandingFrame scanned past the sentinel
  // Reconciliation (the join's tracker): the unit's frames are not in stack_ between touches
  // (adopted_open_ of them: Flush counts them as open).
  const Speculation* adopting_ = nullptr;
  bool in_sync_ = false;      // the join's stack ends with the worker's frames (copying is right)
  bool adopt_failed_ = false;  // a touch left other frames than the worker's
  size_t adopted_open_ = 0;
  size_t adopted_records_ = 0;     // the unit's records adopted so far
  size_t adopted_touches_ = 0;     // touches run so far (their stats added)
  int64_t adopted_position_delta_ = 0;  // the join's position_ minus the worker's
  DecodeStats adopted_stats_;      // the speculation's counts added so far
  std::pair<uint64_t, uint64_t> adopted_events_{};  // units' events copied, and run here

  // Emission state (after the buffer): emitted depth and folding.
  uint32_t emitted_depth_ = 0;
  uint32_t hidden_depth_ = 0;
  uint32_t hidden_max_ = 0;

  // Per address: CodeFacts answers, asked once (calls and jumps hit a few thousand addresses
  // millions of times).
  AddressMap<AddressFacts> address_facts_;
  // The last stretch of known inlined depths (CodeFacts::InlineStretch): a call site inside a
  // uniform one (a function without inlined code) needs no InlineDepth, which symbolizes the
  // address (most call sites are at depth 0, and their names are never shown).
  InlineDepthStretch depth_stretch_;
  // The last jump target and StartOf it (OnJump).
  struct {
    uint64_t to = 0, start = 0;
    bool valid = false;
  } last_jump_;
};

[[gnu::always_inline]] inline void StackTracker::OnEvent(const FlowEvent& e) {
  uint64_t t = e.time_ns;
  const uint64_t position_before = position_;
  position_ += e.insn_count;
  if (!anchored_) [[unlikely]] {
    anchored_ = true;
    anchor_time_ = t;
    anchor_position_ = position_before;  // the instructions before it ran in the first frame
    if (options_.sole_writer) CheckProgramEntry(e);
  } else if (t < last_time_) [[unlikely]] {
    t = last_time_;
    ++stats_[Stat::kClampedTimes];
  }
  last_time_ = t;
  // Bound the buffer between events, when the stack is consistent.
  if (buffer_size_ >= flush_at_) [[unlikely]] {  // held back: spilled_ + buffer_size_
    FlushAtBoundThenDispatch(e, t);
    return;
  }
  Dispatch(e, t);
}

[[gnu::always_inline]] inline void StackTracker::Dispatch(const FlowEvent& e, uint64_t t) {
  using K = FlowEvent::Kind;
  // Calls, returns and jumps are nearly all events: two or three compares reach them, where the
  // switch's table takes a bounds test, two loads and an indirect jump.
  if (e.kind == K::kCall) return OnCall(e, t);
  if (e.kind == K::kJump) return OnJump(e, t);
  if (e.kind == K::kReturn) return OnReturn(e, t);
  switch (e.kind) {
    case K::kCall: OnCall(e, t); return;
    case K::kReturn: OnReturn(e, t); return;
    case K::kJump: OnJump(e, t); return;
    case K::kSyscall:
    case K::kDisable: OnLeave(e, t); return;
    case K::kEnable: OnEnable(e, t); return;
    case K::kAsync: OnAsync(e, t); return;
    case K::kGap: OnGap(e, t); return;
    case K::kInlineChange: OnInlineChange(e, t); return;
    case K::kTrigger: OnTrigger(e, t); return;
    case K::kEnd: OnEnd(t); return;
  }
}

}  // namespace ptscope::decode
