#include "stack/stack_tracker.h"

#include <algorithm>
#include <utility>

namespace ptscope::decode {
namespace {
constexpr size_t kNotFound = static_cast<size_t>(-1);
// Records per SliceSink::WriteRecords call: large enough to amortise the sink's lock and thread
// look-up, small enough to stay in cache.
constexpr size_t kBatchSize = 4096;
}  // namespace

// The hot paths' members are marked inline: in this -fPIC library an ordinary member function
// may be interposed, so the compiler would call it instead of inlining it.
inline StackTracker::AddressFacts& StackTracker::FactsOf(uint64_t ip) {
  return *address_facts_.TryEmplace(ip).first;
}

inline uint64_t StackTracker::StartOf(AddressFacts& facts, uint64_t ip) {
  if (!facts.has_start) {  // CodeFacts do not touch address_facts_: `facts` stays valid
    facts.start = code_.FunctionStart(thread_.pid, ip, last_time_);
    facts.has_start = true;
  }
  return facts.start;
}

inline uint64_t StackTracker::StartOf(uint64_t ip) { return StartOf(FactsOf(ip), ip); }

inline FrameId StackTracker::FunctionFrame(uint64_t ip, uint64_t start) const {
  return FrameId{.address = start != 0 ? start : ip, .kind = FrameId::Kind::kFunction};
}

inline uint32_t StackTracker::InlineDepthOf(AddressFacts& facts, uint64_t call_site) {
  if (!facts.has_inline_depth) {
    facts.inline_depth = std::min<uint32_t>(CallSiteDepth(call_site), 64);
    facts.has_inline_depth = true;
  }
  return facts.inline_depth;
}

uint32_t StackTracker::CallSiteDepth(uint64_t call_site) {
  if (!depth_stretch_.Contains(call_site)) {
    depth_stretch_ = code_.InlineStretch(thread_.pid, call_site, last_time_);
  }
  // Only a uniform stretch answers here: reading a span (DepthAt) would tie the tracker to the
  // symbols library.
  return depth_stretch_.Contains(call_site) && depth_stretch_.uniform
             ? depth_stretch_.uniform_depth
             : code_.InlineDepth(thread_.pid, call_site, last_time_);
}

inline void StackTracker::Emit(RecordType type, uint64_t t, const FrameId& frame, bool inferred,
                               const std::string* text) {
  if (buffer_size_ == buffer_slots_) [[unlikely]] GrowBuffer();
  EmitInSlot(type, t, frame, inferred, text);
}

inline void StackTracker::EmitInSlot(RecordType type, uint64_t t, const FrameId& frame,
                                     bool inferred, const std::string* text) {
  // Every field is set: the slot may hold a record of an earlier flush.
  Record& r = buffer_.data()[buffer_size_++];
  r.type = type;
  r.inferred = inferred;
  r.time_ns = t;
  r.instructions = position_;
  // Field by field: `frame` was usually just stored field by field, and one 16-byte load of it
  // would wait for those stores to retire (a failed store forward).
  r.frame.kind = frame.kind;
  // An instant's text is kept in its frame's address (SliceRecord::text()); its frame is none.
  r.frame.address = text != nullptr ? reinterpret_cast<uintptr_t>(text) : frame.address;
  r.frame.inline_index = frame.inline_index;
  if (type == RecordType::kBegin) {
    buffer_depth_max_ = std::max(buffer_depth_max_, ++buffer_depth_);
  } else if (type == RecordType::kEnd) {
    buffer_depth_min_ = std::min(buffer_depth_min_, --buffer_depth_);
  }
}

inline void StackTracker::Push(const Frame& frame, uint64_t t, bool inferred) {
  stack_.push_back(frame);
  Emit(RecordType::kBegin, t, frame.id, inferred);
}

inline void StackTracker::EnsureCurrent(uint64_t ip) {
  if (stack_.empty()) PushInferredBottom(ip);
}

StackTracker::StackTracker(ThreadKey thread, CodeFacts& code, SliceSink& sink,
                           StackTrackerOptions options)
    : thread_(thread), code_(code), sink_(sink), options_(options) {
  if (options_.max_buffered_events == 0) options_.max_buffered_events = 1;
  if (options_.settled_records == 0) options_.settled_records = 1;
  flush_at_ = options_.max_buffered_events;
  if (sink_.WantsEveryLevel()) options_.max_depth = UINT32_MAX;
}

inline void StackTracker::PopInline(uint64_t t) {
  CloseInlineOfTop(t);
  const Frame& f = stack_.back();
  Emit(RecordType::kEnd, t, f.id, false);
  for (uint16_t i = 0; i < f.inlined_wrappers; ++i) Emit(RecordType::kEnd, t, f.id, false);
  stack_.pop_back();
  NoteClosed();
}

void StackTracker::Pop(uint64_t t) { PopInline(t); }

// For unit_speculation.cpp, where StartOf (inline here) is not seen.
void StackTracker::DispatchOutOfLine(const FlowEvent& e, uint64_t t) { Dispatch(e, t); }

// Whether `e` could touch the incoming stack with `size` frames (the sentinel and the unit's):
// it pops at most one frame (two for a synthetic top and a replaced caller) unless it scans for
// a landing frame, closes everything or runs after a kEnable.
bool StackTracker::MayTouch(const FlowEvent& e, size_t size) {
  using K = FlowEvent::Kind;
  if (size <= 2 || stack_.back().type == FrameType::kSynthetic) return true;
  const Frame& top = stack_.back();
  switch (e.kind) {
    case K::kCall:
    case K::kSyscall:
    case K::kDisable:
    case K::kAsync:
    case K::kInlineChange:
      return false;
    case K::kReturn:
      return e.to != 0 && !(top.return_ip != 0 && top.return_ip == e.to);
    case K::kJump: {
      const uint64_t start = top.function_start;
      const uint64_t to_start = StartOf(e.to);
      return to_start != 0 && to_start != start && to_start != e.to;
    }
    default:
      return true;  // kEnable scans the stack; kGap and kEnd close it
  }
}

// Out of line: the call to Flush would make OnEvent save registers for every event.
void StackTracker::FlushAtBoundThenDispatch(const FlowEvent& e, uint64_t t) {
  FlushBetweenEvents();
  Dispatch(e, t);
}

void StackTracker::FlushBetweenEvents() {
  if (entry_pending_) {
    // Until the bottom frame is open (the first event opens it), flush_at_ stays 0.
    if (stack_.empty() && adopted_open_ == 0) return;
  } else if (!Settled()) {
    // Only a flush at the bound itself changes where callers found later start.
    ++stats_[Stat::kBufferFlushesAtBound];
  }
  Flush();
}

void StackTracker::CheckProgramEntry(const FlowEvent& e) {
  const uint64_t ip = e.kind == FlowEvent::Kind::kEnable ? e.to : e.from;
  if (ip != 0 && code_.IsProgramEntry(thread_.pid, ip, e.time_ns)) {
    entry_pending_ = true;
    flush_at_ = 0;
  }
}

void StackTracker::OnLeave(const FlowEvent& e, uint64_t t) {
  if (!stack_.empty() && stack_.back().type == FrameType::kSynthetic) return;  // already out
  if (e.from != 0) EnsureCurrent(e.from);  // unknown ip: the slice has no parent
  bool syscall = e.kind == FlowEvent::Kind::kSyscall;
  ++stats_[syscall ? Stat::kSyscalls : Stat::kUntraced];
  Frame f;
  f.id.kind = syscall ? FrameId::Kind::kSyscall : FrameId::Kind::kUntraced;
  f.type = FrameType::kSynthetic;
  // `to` is the resume ip when the decoder knows it; else syscall, sysenter and int 0x80 are
  // all 2 bytes long, and an asynchronous disable resumes where it stopped.
  f.resume_ip = e.to != 0 ? e.to : syscall ? e.from + 2 : e.from;
  f.stopped_in_place = e.to == 0 && !syscall;
  Push(f, t, false);
}

void StackTracker::OnTrigger(const FlowEvent& e, uint64_t t) {
  ++stats_[Stat::kTriggers];
  AddInstant(t, e.detail.empty() ? std::string("[trigger]") : "[trigger] " + e.detail.str());
}

void StackTracker::OnEnd(uint64_t t) {
  CloseAll(t);
  Flush();
}

void StackTracker::Finish(uint64_t end_time_ns) {
  uint64_t t = std::max(end_time_ns, last_time_);
  last_time_ = t;
  CloseAll(t);
  Flush();
}

void StackTracker::OnCall(const FlowEvent& e, uint64_t t) {
  // The common case, as OnCallSlow would handle it: a traced caller on the stack, a call site
  // seen before whose function is the caller's (no correction) and whose last callee is this one,
  // no inlined call-site slices to open, and room for the frame and its record.
  // (e.to != 0: a fast_call site's callee is never 0. No wrappers: a fast_call site has none to
  // open, whatever the top frame has open.)
  if (stack_.empty() || buffer_size_ == buffer_slots_ || !stack_.HasRoom()) [[unlikely]] {
    return OnCallSlow(e, t);
  }
  const Frame& top = stack_.back();
  const AddressFacts* site = address_facts_.Find(e.from);
  if (top.type == FrameType::kSynthetic || site == nullptr || !site->fast_call ||
      site->callee != e.to) [[unlikely]] {
    return OnCallSlow(e, t);
  }
  const bool corrected = site->start != 0 && top.function_start != 0 &&
                         site->start != top.function_start;
  if (corrected) [[unlikely]] return OnCallSlow(e, t);
  ++stats_[Stat::kCalls];
  const uint64_t start = site->callee_start;
  Frame& f = stack_.PushInRoom();
  f.id = FunctionFrame(e.to, start);
  f.function_start = start;
  f.return_ip = e.return_ip();
  EmitInSlot(RecordType::kBegin, t, f.id, false);
}

void StackTracker::OnCallSlow(const FlowEvent& e, uint64_t t) {
  CloseSyntheticTop(t);
  ++stats_[Stat::kCalls];
  EnsureCurrent(e.from);
  // The callee is unknown (the trace ends at the call, or tracing stops there): no frame for
  // "address 0". A return to the call's return address later lands on the caller as it is.
  if (e.to == 0) [[unlikely]] return;
  // One look-up for both facts about the call site (calls are the hottest event).
  AddressFacts& site = FactsOf(e.from);
  const uint64_t from_start = StartOf(site, e.from);
  const bool corrected = from_start != 0 && stack_.back().function_start != 0 &&
                         from_start != stack_.back().function_start;
  // Inlined slices already open in the caller (kInlineChange) make call-site wrappers redundant
  // (ReplaceTop closes them).
  const bool wrap = options_.inlined_frames && (corrected || stack_.back().inline_open == 0);
  const uint32_t wrappers = wrap ? InlineDepthOf(site, e.from) : 0;
  if (corrected) {
    ++stats_[Stat::kCorrectedCallers];
    ReplaceTop(e.from, from_start, t, true);
  }
  for (uint32_t i = 0; i < wrappers; ++i) {
    FrameId inl{.address = e.from, .inline_index = i, .kind = FrameId::Kind::kInlined};
    Emit(RecordType::kBegin, t, inl, false);
  }
  stats_[Stat::kInlinedSlices] += wrappers;
  // Most call sites always call the same function: the site remembers its last callee's start,
  // which saves the look-up of the target's facts.
  uint64_t start = site.callee_start;
  if (site.callee != e.to) [[unlikely]] {  // e.to != 0: a new site never matches
    start = StartOf(e.to);
    AddressFacts& same_site = FactsOf(e.from);  // StartOf may have moved `site` (a new entry)
    same_site.callee = e.to;
    same_site.callee_start = start;
    same_site.fast_call = !options_.inlined_frames ||
                          (same_site.has_inline_depth && same_site.inline_depth == 0);
  } else if (!site.fast_call) {
    site.fast_call = !options_.inlined_frames || (site.has_inline_depth && site.inline_depth == 0);
  }
  // Built in place (what Push does): copying a fresh local Frame stalls on the stores just made.
  Frame& f = stack_.emplace_back();
  f.id = FunctionFrame(e.to, start);
  f.function_start = start;
  f.return_ip = e.return_ip();
  f.inlined_wrappers = static_cast<uint16_t>(wrappers);
  Emit(RecordType::kBegin, t, f.id, false);
}

void StackTracker::OnReturn(const FlowEvent& e, uint64_t t) {
  // The common case, as OnReturnSlow would handle it: the top frame (a traced function with a
  // frame below it) returns to its return address with no inlined slices open in or around it,
  // the frame below has none open either (CloseInlineDeeperThan does nothing), and the frame was
  // not written out before (NoteClosed flushes nothing).
  const size_t size = stack_.size();
  if (size < 2 || e.to == 0 || buffer_size_ == buffer_slots_) [[unlikely]] {
    return OnReturnSlow(e, t);
  }
  const Frame& top = stack_.back();
  const Frame& below = stack_[size - 2];
  if (top.return_ip != e.to || top.type == FrameType::kSynthetic || top.inline_open != 0 ||
      top.inlined_wrappers != 0 || (below.inline_open != 0 && options_.inlined_frames &&
                                    below.type != FrameType::kSynthetic)) [[unlikely]] {
    return OnReturnSlow(e, t);
  }
  ++stats_[Stat::kReturns];
  EmitInSlot(RecordType::kEnd, t, top.id, false);
  stack_.pop_back();
  if (size - 1 < written_open_) written_open_ = size - 1;  // NoteClosed, which flushes at 0
}

void StackTracker::OnReturnSlow(const FlowEvent& e, uint64_t t) {
  CloseSyntheticTop(t);
  ++stats_[Stat::kReturns];
  EnsureCurrent(e.from);
  const Frame& top = stack_.back();
  if (e.to == 0) [[unlikely]] {
    // Where it returned is unknown (the trace ends at the return, or tracing stops there): the
    // frame is done, and nothing is known about its caller. Re-anchoring here would close the
    // whole stack and start an inferred frame for address 0.
    if (top.return_ip != 0 || top.type != FrameType::kFunction) Pop(t);
    return;
  }
  if (top.return_ip != 0 && top.return_ip == e.to) {  // the common case
    PopInline(t);
    if (stack_.empty()) {
      PushInferredBottom(e.to);
    } else {
      CloseInlineDeeperThan(e.to, t);
    }
    return;
  }
  size_t keep = FindLandingFrame(e.to, StartOf(e.to), false);
  if (keep != kNotFound) {  // longjmp-like return or exception landing deeper in the stack
    ++stats_[Stat::kUnwinds];
    stats_[Stat::kUnwoundFrames] += stack_.size() - keep;
    PopTo(keep, t);
    if (stack_.empty()) PushInferredBottom(e.to);
    return;
  }
  if (top.return_ip == 0) {  // the inferred bottom frame returns: its caller is revealed
    Pop(t);
    if (stack_.empty()) PushInferredBottom(e.to);
    return;
  }
  if (top.type == FrameType::kAsyncHandler) {
    // The handler returned into the signal trampoline: it stays nested under the interrupted
    // frame until execution resumes at the interrupted ip.
    ReplaceTop(e.to, StartOf(e.to), t, false);
    return;
  }
  ++stats_[Stat::kReanchors];
  CloseAll(t);
  Flush();
  PushInferredBottom(e.to);
}

void StackTracker::OnJump(const FlowEvent& e, uint64_t t) {
  // The common case, as OnJumpSlow would handle it: a loop's jump to the last target again, inside
  // the traced top frame's function (or to unknown code).
  if (stack_.empty() || e.to != last_jump_.to || !last_jump_.valid ||
      stack_.back().type == FrameType::kSynthetic) [[unlikely]] {
    return OnJumpSlow(e, t);
  }
  const uint64_t to_start = last_jump_.start;
  if (to_start != 0 && to_start != stack_.back().function_start) [[unlikely]] {
    return OnJumpSlow(e, t);
  }
}

void StackTracker::OnJumpSlow(const FlowEvent& e, uint64_t t) {
  CloseSyntheticTop(t);
  EnsureCurrent(e.from);
  // Most jumps are a loop's, taken again and again: the last target's start saves the look-up.
  if (e.to != last_jump_.to || !last_jump_.valid) last_jump_ = {e.to, StartOf(e.to), true};
  const uint64_t to_start = last_jump_.start;
  if (to_start == 0 || to_start == stack_.back().function_start) return;  // local or unknown
  if (e.to == to_start) {
    ++stats_[Stat::kTailCalls];
    ReplaceTop(e.to, to_start, t, false);
    return;
  }
  size_t keep = FindLandingFrame(e.to, to_start, false);
  if (keep != kNotFound) {  // longjmp into a frame deeper in the stack
    ++stats_[Stat::kUnwinds];
    stats_[Stat::kUnwoundFrames] += stack_.size() - keep;
    PopTo(keep, t);
    if (stack_.empty()) PushInferredBottom(e.to);
    return;
  }
  ++stats_[Stat::kLateralJumps];  // e.g. foo -> foo.cold, or a tail call into a non-entry
  ReplaceTop(e.to, to_start, t, false);
}

void StackTracker::OnEnable(const FlowEvent& e, uint64_t t) {
  bool was_out = !stack_.empty() && stack_.back().type == FrameType::kSynthetic;
  uint64_t resume_ip = was_out ? stack_.back().resume_ip : 0;
  const bool stopped_in_place = was_out && stack_.back().stopped_in_place;
  CloseSyntheticTop(t);
  if (stack_.empty()) {
    if (e.to != 0) EnsureCurrent(e.to);
    return;
  }
  // Resuming exactly where tracing stopped without a branch (a preempted thread switched in
  // again): nothing returned meanwhile, even when that ip is also an open frame's return address.
  // It is the top frame's own in a recursion stopped just after a recursive call returned: the
  // frames of one call site share it, and landing there closed a frame that was still running.
  // (A kDisable whose `to` is a return's target left by that return: landing there is right.)
  if (stopped_in_place && e.to == resume_ip) return;
  // Resuming at an open frame's return address: the untraced callee (or the signal handler whose
  // "return address" is the interrupted ip) has returned.
  size_t keep = FindLandingFrame(e.to, 0, true);
  if (keep == kNotFound) {
    // Resuming where tracing was to resume (a syscall's return, the common case) is no signal
    // handler: tested before StartOf, whose look-up missed the cache on most enables (perf
    // annotate, synth-100M).
    if (!was_out || e.to == resume_ip) return;
    uint64_t to_start = StartOf(e.to);
    if (to_start == e.to && to_start != stack_.back().function_start) {
      // Entered a function instead of resuming: a signal handler (user-only tracing).
      ++stats_[Stat::kAsyncHandlers];
      Frame f;
      f.id = FunctionFrame(e.to, to_start);
      f.function_start = to_start;
      f.return_ip = resume_ip;
      f.type = FrameType::kAsyncHandler;
      Push(f, t, false);
    }
    return;
  }
  if (stack_.size() - keep > 1) {
    ++stats_[Stat::kUnwinds];
    stats_[Stat::kUnwoundFrames] += stack_.size() - keep;
  }
  PopTo(keep, t);
  if (stack_.empty()) PushInferredBottom(e.to);
}

void StackTracker::OnAsync(const FlowEvent& e, uint64_t t) {
  CloseSyntheticTop(t);
  ++stats_[Stat::kAsyncHandlers];
  if (e.from != 0) EnsureCurrent(e.from);
  uint64_t start = StartOf(e.to);
  Frame f;
  f.id = FunctionFrame(e.to, start);
  f.function_start = start;
  f.return_ip = e.from;  // a return (or resumption) at the interrupted ip closes the handler
  f.type = FrameType::kAsyncHandler;
  Push(f, t, false);
}

void StackTracker::OnGap(const FlowEvent& e, uint64_t t) {
  CloseAll(t);
  std::string text = std::string("[gap] ") + GapCauseName(e.gap_cause);
  if (!e.detail.empty()) text += ": " + e.detail.str();
  AddInstant(t, std::move(text));
  Flush();  // everything is closed: nothing before the gap can change; inference restarts at t
}

size_t StackTracker::FindLandingFrame(uint64_t to, uint64_t to_start,
                                      bool by_return_ip_only) const {
  for (size_t i = stack_.size(); i-- > 0;) {
    const Frame& f = stack_[i];
    if (f.return_ip != 0 && f.return_ip == to) return i;  // returns into the frame below i
    bool below_top = i + 1 < stack_.size();
    if (!by_return_ip_only && below_top && to_start != 0 && f.function_start == to_start) {
      return i + 1;  // lands inside frame i itself
    }
  }
  touched_ = true;  // speculating: the incoming stack might have held the landing frame
  return kNotFound;
}

void StackTracker::PushInferredBottom(uint64_t ip) {
  // Only called with an empty stack: every buffered record is closed, so the new frame can start
  // at the anchor and wrap all of them.
  uint64_t start = StartOf(ip);
  Frame f;
  f.id = FunctionFrame(ip, start);
  f.function_start = start;
  stack_.push_back(f);
  ++stats_[Stat::kInferredFrames];
  Record& r = inferred_prefix_.emplace_back();
  r.type = RecordType::kBegin;
  r.inferred = true;
  r.time_ns = anchor_time_;
  r.instructions = anchor_position_;
  r.frame = f.id;
}

void StackTracker::PopTo(size_t new_size, uint64_t t) {
  while (stack_.size() > new_size) Pop(t);
}

void StackTracker::ReplaceTop(uint64_t ip, uint64_t start, uint64_t t, bool inferred) {
  CloseInlineOfTop(t);
  Frame replacement = stack_.back();  // keeps return address, type and inlined wrappers
  Emit(RecordType::kEnd, t, replacement.id, false);
  stack_.pop_back();
  NoteClosed();
  replacement.id = FunctionFrame(ip, start);
  replacement.function_start = start;
  Push(replacement, t, inferred);
}

inline void StackTracker::CloseInlineDeeperThan(uint64_t ip, uint64_t t) {
  // The flow decoder restates a non-zero depth after every transfer, but not a zero one after
  // code that was itself at depth zero (the callee): an inlined slice of the caller that the
  // call was made from must then close here, where the caller resumes outside it.
  Frame& top = stack_.back();
  if (!options_.inlined_frames || top.inline_open == 0 || top.type == FrameType::kSynthetic) return;
  uint32_t depth = InlineDepthOf(FactsOf(ip), ip);
  while (top.inline_open > depth) {
    --top.inline_open;
    Emit(RecordType::kEnd, t, top.id, false);
  }
}

void StackTracker::OnInlineChange(const FlowEvent& e, uint64_t t) {
  if (!options_.inlined_frames) return;
  if (!stack_.empty() && stack_.back().type == FrameType::kSynthetic) return;
  // A statement of the depth already open changes nothing (the loops below do nothing): a unit
  // that continues another states the depth of its first block, whatever it was before
  // (join/unit_join.h). Depth 0 with nothing open must not open an inferred frame either.
  if (stack_.empty() && e.inline_depth == 0) return;
  EnsureCurrent(e.from);
  Frame& top = stack_.back();
  uint32_t depth = std::min<uint32_t>(e.inline_depth, 64);
  while (top.inline_open > depth) {
    --top.inline_open;
    Emit(RecordType::kEnd, t, top.id, false);
  }
  while (top.inline_open < depth) {
    const FrameId inlined{
        .address = e.from, .inline_index = top.inline_open, .kind = FrameId::Kind::kInlined};
    Emit(RecordType::kBegin, t, inlined, false);
    ++top.inline_open;
    ++stats_[Stat::kInlinedSlices];
  }
}

inline void StackTracker::CloseInlineOfTop(uint64_t t) {
  Frame& top = stack_.back();
  for (; top.inline_open > 0; --top.inline_open) Emit(RecordType::kEnd, t, top.id, false);
}

inline void StackTracker::NoteClosed() {
  if (stack_.size() >= written_open_) return;
  written_open_ = stack_.size();
  // The last frame already written out has closed: what is buffered can no longer be wrapped.
  if (written_open_ == 0) Flush();
}

inline void StackTracker::CloseSyntheticTop(uint64_t t) {
  if (!stack_.empty() && stack_.back().type == FrameType::kSynthetic) Pop(t);
}

void StackTracker::CloseAll(uint64_t t) { PopTo(0, t); }

void StackTracker::GrowBuffer() {
  const RecordSpill* spill = options_.spill;
  if (spill != nullptr && buffer_size_ >= spill->block_records()) {
    SpillBuffer();
    return;
  }
  // resize() writes the new slots: double up to the bound (plus one event's records, checked
  // between events), and past it grow only by what a long unwind needs.
  const size_t size = buffer_.size(), bound = options_.max_buffered_events;
  size_t grown = size < bound ? std::min(std::max<size_t>(256, 2 * size), bound + 256)
                              : size + size / 8 + 256;
  // With a RecordSpill it stops at one block, which then goes there.
  if (spill != nullptr) grown = std::min(grown, spill->block_records());
  buffer_.resize(grown);
  buffer_slots_ = buffer_.size();
}

void StackTracker::SpillBuffer() {
  // buffer_ is one full block (GrowBuffer grows it to no more with a RecordSpill). The spill may
  // keep buffer_ itself and give back another vector of the same size.
  spilled_blocks_.push_back(options_.spill->Store(buffer_, buffer_size_));
  buffer_slots_ = buffer_.size();
  spilled_ += buffer_size_;
  buffer_size_ = 0;
  const size_t limit = HoldBackLimit();
  flush_at_ = spilled_ < limit ? limit - spilled_ : 0;
}

size_t StackTracker::HoldBackLimit() const {
  return Settled() ? std::min(options_.settled_records, options_.max_buffered_events)
                   : options_.max_buffered_events;
}

template <typename Out>
void StackTracker::ForEachHeld(Out&& out) {
  if (!spilled_blocks_.empty()) {
    spill_scratch_.resize(kBatchSize);
    for (int64_t handle : spilled_blocks_) {
      // A block that cannot be read back is left out; RecordSpill::error() fails the decode.
      if (spill_reader_.Open(*options_.spill, handle)) {
        const Record* run = nullptr;
        while (size_t count = spill_reader_.Read(&run, spill_scratch_.data(), kBatchSize)) {
          out(run, count);
        }
      }
    }
  }
  out(buffer_.data(), buffer_size_);
}

void StackTracker::ReleaseHeld() {
  for (int64_t handle : spilled_blocks_) options_.spill->Release(handle);
  spilled_blocks_.clear();
}

void StackTracker::AddInstant(uint64_t t, std::string text) {
  texts_.push_back(std::move(text));
  Emit(RecordType::kInstant, t, FrameId{}, false, &texts_.back());
}

inline bool StackTracker::BufferPassesDepthCap() const {
  // No Begin reaches max_depth (folded) and no End finds nothing emitted open (dropped): each
  // record of buffer_ would then be queued as it is.
  const int64_t depth = emitted_depth_;
  return hidden_depth_ == 0 && depth + buffer_depth_min_ >= 0 &&
         depth + buffer_depth_max_ <= static_cast<int64_t>(options_.max_depth);
}

void StackTracker::Flush() {
  if (speculating_) [[unlikely]] return;  // a worker's records stay for the join
  for (auto it = inferred_prefix_.rbegin(); it != inferred_prefix_.rend(); ++it) Write(*it);
  if (BufferPassesDepthCap()) {
    // The common case: buffer_ goes to the sink as it is, after the prefix, in runs of
    // kBatchSize (what a sink such as WindowSink copies per call stays small).
    SendBatch();
    ForEachHeld([&](const Record* records, size_t count) {
      for (size_t i = 0; i < count; i += kBatchSize) {
        sink_.WriteRecords(thread_, records + i, std::min(kBatchSize, count - i));
      }
    });
    emitted_depth_ = static_cast<uint32_t>(emitted_depth_ + buffer_depth_);
  } else {
    ForEachHeld([&](const Record* records, size_t count) {
      for (size_t i = 0; i < count; ++i) Write(records[i]);
    });
    SendBatch();
  }
  // Only now are texts_ cleared and the spilled blocks released: instants point into them.
  entry_pending_ = false;
  inferred_prefix_.clear();
  ReleaseHeld();
  spilled_ = 0;
  buffer_size_ = 0;
  buffer_depth_ = buffer_depth_max_ = buffer_depth_min_ = 0;
  texts_.clear();
  written_open_ = stack_.size() + adopted_open_;
  flush_at_ = HoldBackLimit();
  anchor_time_ = last_time_;
  anchor_position_ = position_;
}

inline void StackTracker::Write(const Record& r) {
  switch (r.type) {
    case RecordType::kBegin:
      if (emitted_depth_ >= options_.max_depth) {
        ++hidden_depth_;
        hidden_max_ = std::max(hidden_max_, hidden_depth_);
        ++stats_[Stat::kFoldedFrames];
        return;
      }
      ++emitted_depth_;
      AddToBatch(SliceRecord::Type::kBegin, r, nullptr);
      return;
    case RecordType::kEnd:
      if (hidden_depth_ > 0) {
        if (--hidden_depth_ == 0) {
          stats_[Stat::kFoldedLevels] += hidden_max_;
          batch_texts_.push_back("[folded] " + std::to_string(hidden_max_) +
                                 " deeper call levels not shown (max depth " +
                                 std::to_string(options_.max_depth) + ")");
          hidden_max_ = 0;
          // Sent at once: the note must not move (batch_texts_ growing) before the sink has it.
          AddToBatch(SliceRecord::Type::kInstant, r, &batch_texts_.back());
          SendBatch();
        }
        return;
      }
      if (emitted_depth_ == 0) return;
      --emitted_depth_;
      AddToBatch(SliceRecord::Type::kEnd, r, nullptr);
      return;
    case RecordType::kInstant:
      AddToBatch(SliceRecord::Type::kInstant, r, r.text());
      return;
  }
}

inline void StackTracker::AddToBatch(SliceRecord::Type type, const Record& r, const std::string* text) {
  SliceRecord& out = batch_.emplace_back();
  out.type = type;
  out.inferred = r.inferred;
  out.time_ns = r.time_ns;
  out.instructions = r.instructions;
  if (type == SliceRecord::Type::kInstant) {
    out.SetText(text);  // an instant has no frame (a folded note's record is the End's)
  } else {
    out.frame.address = r.frame.address;
    out.frame.inline_index = r.frame.inline_index;
    out.frame.kind = r.frame.kind;
  }
  if (batch_.size() >= kBatchSize) SendBatch();
}

void StackTracker::SendBatch() {
  if (batch_.empty()) return;
  sink_.WriteRecords(thread_, batch_.data(), batch_.size());
  batch_.clear();
  batch_texts_.clear();
}

}  // namespace ptscope::decode
