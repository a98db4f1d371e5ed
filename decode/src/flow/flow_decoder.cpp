// Block-decoder loop, block classification and time interpolation (see flow_decoder.h).
#include "flow/flow_decoder.h"

#include <algorithm>
#include <cstring>

namespace ptscope::decode {
namespace {

constexpr size_t kMaxWaiting = 1 << 16;  // bound memory when a stream has no timing at all
constexpr uint64_t kNoTime = UINT64_MAX - 1;

constexpr BranchClass FromIclass(pt_insn_class iclass) {
  switch (iclass) {
    case ptic_call: return BranchClass::kCall;
    case ptic_return: return BranchClass::kReturn;
    case ptic_jump: return BranchClass::kJump;
    case ptic_cond_jump: return BranchClass::kCondJump;
    case ptic_far_call: return BranchClass::kFarCall;
    case ptic_far_return: return BranchClass::kFarReturn;
    case ptic_far_jump: return BranchClass::kFarJump;
    default: return BranchClass::kOther;
  }
}

// The branch a block ends with, looked up instead of switched on: in real (and random-walk)
// control flow the next block's kind is unpredictable, and each mispredicted switch costs more
// than the whole table look-up (callgrind's branch simulation put HandleBlock's switches among
// the top mispredicted branches of a decode).
struct BlockEnd {
  bool pending;          // the next block's first address is this branch's target
  FlowEvent::Kind kind;  // the event it makes then
};
constexpr size_t kBranchClasses = static_cast<size_t>(BranchClass::kFarJump) + 1;
constexpr std::array<BlockEnd, kBranchClasses> kBlockEnds = [] {
  std::array<BlockEnd, kBranchClasses> ends{};
  for (BlockEnd& end : ends) end = {false, FlowEvent::Kind::kJump};
  ends[static_cast<size_t>(BranchClass::kCall)] = {true, FlowEvent::Kind::kCall};
  ends[static_cast<size_t>(BranchClass::kReturn)] = {true, FlowEvent::Kind::kReturn};
  ends[static_cast<size_t>(BranchClass::kJump)] = {true, FlowEvent::Kind::kJump};
  ends[static_cast<size_t>(BranchClass::kFarJump)] = {true, FlowEvent::Kind::kJump};
  return ends;
}();
constexpr size_t kIclasses = static_cast<size_t>(ptic_ptwrite) + 1;
constexpr std::array<BranchClass, kIclasses> kClassOfIclass = [] {
  std::array<BranchClass, kIclasses> classes{};
  for (size_t i = 0; i < kIclasses; ++i) classes[i] = FromIclass(static_cast<pt_insn_class>(i));
  return classes;
}();

// a * b / c without overflow; 64-bit arithmetic when the product fits (nearly always: a is a
// time step in ns, b an instruction count), which is several times cheaper than 128-bit division.
// (A double reciprocal per interval with an exact integer correction, instead of a division per
// event, measured no faster on AMD Zen 3: the division is not what limits these loops.)
inline uint64_t MulDiv(uint64_t a, uint64_t b, uint64_t c) {
  if ((a >> 32) == 0 && (b >> 32) == 0) return a * b / c;
  return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b / c);
}

}  // namespace

FlowDecoder::FlowDecoder(const DecoderSetup& setup, const CodeImages& images, uint32_t pid,
                         FlowOutput& out)
    : setup_(setup), out_(out), image_(images, pid) {
  waiting_.reserve(256);
}

FlowDecoder::~FlowDecoder() = default;

void FlowDecoder::DecodeSegment(const uint8_t* begin, size_t size) {
  if (size == 0) return;
  pt_config config;
  pt_config_init(&config);
  setup_.Apply(config);
  config.begin = const_cast<uint8_t*>(begin);
  config.end = const_cast<uint8_t*>(begin) + size;
  config.flags.variant.block.end_on_call = 1;
  config.flags.variant.block.end_on_jump = 1;
  config.flags.variant.block.enable_tick_events = 1;
  if (walker_cache_ != nullptr) {
    walker_ = std::make_unique<QueryWalker>(config, walker_code_, walker_cache_);
    if (!walker_->ok()) walker_.reset();
  } else {
    decoder_ = pt_blk_alloc_decoder(&config);
  }
  if (!Decoding()) {
    FailSegment("libipt refused the decoder configuration");
    return;
  }
  RefreshFastStretch();  // another decoder of this worker may have moved the shared stretch
  if (block_inline_->call_lengths == nullptr) {
    block_inline_->call_lengths =
        std::make_unique<BlockInlineCache::CallLength[]>(BlockInlineCache::kCallLengthSlots);
  }
  int status = SyncForward();
  if (status < 0) {
    QueueGap(GapCause::kDecodeError, 0,
             "no PSB in " + std::to_string(size) + " bytes of trace: nothing to decode");
  }
  bool synced = status >= 0;
  while (synced) {
    uint64_t tsc = 0;
    uint32_t lost_mtc = 0, lost_cyc = 0;
    if (Time(&tsc, &lost_mtc, &lost_cyc) >= 0 && tsc != 0) Anchor(tsc);
    // Without any time yet, take the mappings in force at the end of the capture.
    uint64_t image_time = have_anchor_ ? anchor_ns_ : kNoTime;
    if (timeline_ != nullptr) UpdateThread(image_time);
    if (image_.NeedsSwitch(image_time)) SwitchImageIfNeeded(image_time);
    for (;;) {
      if ((status & pts_event_pending) != 0) status = DrainEvents(status);
      if (status < 0 || (status & pts_eos) != 0) break;
      pt_block block;  // pt_blk_next zeroes it first, also when it fails
      status = NextBlock(&block);
      if (block.ninsn > 0) HandleBlock(block);
      if (status >= 0 && position_ >= next_stuck_check_ && StuckCheck()) status = -pte_internal;
      if (status < 0) {
        uint64_t offset = 0;
        Offset(&offset);
        HandleError(status, block, offset);
        break;
      }
    }
    if (status == -pte_eos || (status >= 0 && (status & pts_eos) != 0)) break;
    if (status >= 0) break;
    // Resync at the next PSB after the one we last synced at (libipt's own sync_forward would
    // start after its look-ahead and can skip a PSB).
    uint64_t last_sync = 0, current = 0;
    if (SyncOffset(&last_sync) < 0) last_sync = UINT64_MAX;
    if (Offset(&current) < 0) current = 0;
    int64_t next = ResyncOffset(begin, size, current, last_sync);
    status = next < 0 ? -pte_eos : SyncSet(static_cast<uint64_t>(next));
    synced = status >= 0;
  }
  FinishSegment();
}

void FlowDecoder::FailSegment(std::string detail) {
  if (stats_.first_error.empty()) stats_.first_error = detail;
  QueueGap(GapCause::kDecodeError, 0, std::move(detail));
  FinishSegment();
}

void FlowDecoder::FinishSegment() {
  if (buffer_ != nullptr && next_unit_.valid) {
    JoinNextUnit();
  } else {
    ResolvePending(0);
  }
  FlushExtrapolated();
  if (decoder_ != nullptr) pt_blk_free_decoder(decoder_);
  decoder_ = nullptr;
  walker_.reset();
  stats_.instructions = position_;  // every instruction retired is counted in position_
  if (buffer_ != nullptr) {
    buffer_->stats = stats_;
    buffer_->last_end_ip = last_end_ip_;
    buffer_->trailing_insns = position_ - last_event_position_;
    buffer_->end_ns = last_emitted_ns_;
    if (have_anchor_ && rate_insns_ != 0) {
      buffer_->end_ns = std::max(
          buffer_->end_ns,
          anchor_ns_ + MulDiv(rate_ns_, position_ - anchor_position_, rate_insns_));
    }
    buffer_->end_inline_depth = inline_depth_ == kUnknownDepth ? 0 : inline_depth_;
    buffer_->end_after_transfer = inline_after_transfer_;
    buffer_->end_stretch = {thread_, thread_since_ns_};
    buffer_->end_depth_unknown = switched_in_ && inline_depth_ == kUnknownDepth;
  }
}

bool KeepRestatement(const UnitEvents* previous, const UnitEvents& next) {
  // Another thread's stretch than the one the previous unit ended in: a sequential decoder saw
  // a switch-in there, and states the depth afresh.
  // So does one whose depth the previous unit never learnt after a switch-in.
  if (previous != nullptr &&
      (previous->end_depth_unknown || !(previous->end_stretch == next.restate_stretch))) {
    return true;
  }
  uint32_t depth = previous != nullptr ? previous->end_inline_depth : 0;
  bool after_transfer = previous != nullptr && previous->end_after_transfer;
  // The rule for a block, with the previous unit's end state.
  return RestatesDepth(after_transfer, depth, next.restate_depth);
}

void FlowDecoder::JoinNextUnit() {
  // The unit was decoded through the next unit's PSB+ header, so libipt stopped exactly where the
  // next unit starts: a branch still waiting for its target goes there. (The header's TSC is not
  // used as an anchor here, as a sequential decoder does not use it either: the next unit starts
  // from it, and the time of the events between this unit's last timing packet and the join is
  // extrapolated at the rate before.)
  ResolvePending(next_unit_.ip);
}

void FlowDecoder::UpdateThread(uint64_t time_ns) {
  uint64_t since_ns = 0;
  ThreadKey thread = timeline_->ThreadOnCpu(cpu_, time_ns, &since_ns);
  // A new stretch also when the same thread was switched in again (it may have run on another
  // CPU in between, and the pipeline orders each thread's stretches by time).
  if (have_thread_ && thread == thread_ && since_ns == thread_since_ns_) return;
  if (have_thread_) {
    // A thread switched in (another one, or this one again): it may have run on another CPU
    // since it last ran here, whose stream this decoder does not see, so the inlined depth it
    // last had here is not its state now. It states its depth afresh at its first block, as a
    // decoder of any unit size does (see KeepRestatement for a unit that starts mid-stretch).
    inline_depth_ = kUnknownDepth;
    switched_in_ = true;
  }
  have_thread_ = true;
  thread_ = thread;
  thread_since_ns_ = since_ns;
  if (buffer_ != nullptr) {
    size_t first = buffer_->events.size() + waiting_.size();
    if (!buffer_->runs.empty() && buffer_->runs.back().first == first) {
      buffer_->runs.back().thread = thread;
    } else {
      buffer_->runs.push_back(UnitEvents::Run{thread, first});
    }
  }
  if (thread.pid != image_.pid()) {
    image_.SetPid(thread.pid);
    RefreshFastStretch();
    if (Decoding()) SwitchImageIfNeeded(time_ns);
  }
}

bool FlowDecoder::StuckCheck() {
  // Damaged trace can leave libipt walking a loop of direct jumps that needs no packets: without
  // this bound pt_blk_next would return blocks forever. Real code cannot retire this many
  // instructions without producing a single packet. (Checked every few thousand instructions, by
  // position_, which the block loop keeps anyway: asking libipt for its offset after every block
  // cost a few percent of a decode, and even a per-block counter cost 1%.)
  constexpr uint64_t kMaxInsnsWithoutTrace = uint64_t{1} << 20;
  constexpr uint64_t kCheckInterval = uint64_t{1} << 12;
  next_stuck_check_ = position_ + kCheckInterval;
  uint64_t offset = 0;
  Offset(&offset);
  if (offset != stuck_offset_) {
    stuck_offset_ = offset;
    stuck_position_ = position_;
    return false;
  }
  if (position_ - stuck_position_ < kMaxInsnsWithoutTrace) return false;
  stuck_position_ = position_;
  if (stats_.first_error.empty()) {
    stats_.first_error = "decoding looped without consuming trace at offset " +
                         std::to_string(offset + offset_base_) + " (damaged trace?)";
  }
  return true;
}

int FlowDecoder::DrainEvents(int status) {
  while (status >= 0 && (status & pts_event_pending) != 0) {
    pt_event event;
    status = NextEvent(&event);
    if (status < 0) {
      uint64_t offset = 0;
      Offset(&offset);
      pt_block none;
      std::memset(&none, 0, sizeof none);
      HandleError(status, none, offset);
      return status;
    }
    HandleEvent(event);
  }
  return status;
}

void FlowDecoder::HandleEvent(const pt_event& event) {
  switch (event.type) {
    case ptev_enabled:
      if (event.has_tsc) Anchor(event.tsc);
      if (timeline_ != nullptr && !event.status_update) {
        // Tracing resumes after a context switch on this CPU: who runs now?
        uint64_t tsc = 0;
        uint32_t lost_mtc = 0, lost_cyc = 0;
        if (!event.has_tsc && Time(&tsc, &lost_mtc, &lost_cyc) >= 0 && tsc != 0) {
          Anchor(tsc);
        }
        UpdateThread(have_anchor_ ? anchor_ns_ : kNoTime);
      }
      if (!event.status_update) Queue(FlowEvent::Kind::kEnable, 0, event.variant.enabled.ip);
      break;
    case ptev_disabled: {
      uint64_t resume = event.ip_suppressed ? 0 : event.variant.disabled.ip;
      ResolvePending(resume);
      bool syscall = last_class_ == BranchClass::kFarCall;
      Queue(syscall ? FlowEvent::Kind::kSyscall : FlowEvent::Kind::kDisable, last_end_ip_, resume);
      if (event.has_tsc) Anchor(event.tsc);
      break;
    }
    case ptev_async_disabled:
      ResolvePending(event.variant.async_disabled.at);
      Queue(FlowEvent::Kind::kDisable, event.variant.async_disabled.at, 0);
      if (event.has_tsc) Anchor(event.tsc);
      break;
    case ptev_async_branch:
      ResolvePending(event.variant.async_branch.from);
      Queue(FlowEvent::Kind::kAsync, event.variant.async_branch.from,
            event.variant.async_branch.to);
      if (event.has_tsc) Anchor(event.tsc);
      break;
    case ptev_overflow:
      ResolvePending(0);
      FlushExtrapolated();
      QueueGap(GapCause::kOverflow, event.ip_suppressed ? 0 : event.variant.overflow.ip,
               "trace overflow: the CPU dropped trace data");
      have_anchor_ = false;
      if (event.has_tsc) Anchor(event.tsc);
      break;
    case ptev_tick:
      if (event.has_tsc) Anchor(event.tsc);
      break;
    default:
      // Status updates (PSB+) are read ahead of the instruction flow: their time is not ours yet.
      if (event.has_tsc && !event.status_update) Anchor(event.tsc);
      break;
  }
}

BranchInsn FlowDecoder::ClassifyLast(const pt_block& block) {
  uint8_t bytes[15];
  size_t size = 0;
  if (block.truncated) {
    size = block.size;
    std::memcpy(bytes, block.raw, size);
    return ClassifyBranch(bytes, size);
  }
  // Code at an address does not change for a process (JIT code aside, whose calls are rare):
  // classify each block end once instead of reading libipt's locked image cache every time.
  auto [cached, inserted] = block_inline_->branches.TryEmplace(BlockInlineKey{image_.pid(), block.end_ip});
  if (!inserted) return *cached;
  int read = pt_iscache_read(image_.iscache(), bytes, sizeof bytes, block.isid, block.end_ip);
  if (read <= 0) read = static_cast<int>(image_.ReadJit(bytes, sizeof bytes, block.end_ip));
  *cached = read <= 0 ? BranchInsn{} : ClassifyBranch(bytes, static_cast<size_t>(read));
  return *cached;
}

// Inlined into DecodeSegment's loop, its only caller: the call, with its register saves, was
// about a fifth of the per-block work outside libipt.
//
// Which blocks end in a call, a return or a jump is unpredictable in real control flow, so the
// per-block work takes no branch on it: the previous block's pending event is written into the
// queue's spare slot and kept or not (EventBuffer::Commit), and the length of a call comes from a
// direct-mapped table probed for every block. The two branches this replaced cost 1.1
// mispredicts per block between them (callgrind --branch-sim=yes on a pt-synth capture: 0.83M
// and 0.63M for 1.34M blocks).
[[gnu::always_inline]] inline void FlowDecoder::HandleBlock(const pt_block& block) {
  {
    // ResolvePending's work (AppendEvent's, for a pending branch), whether or not one is pending.
    // As a number hidden from the optimizer, which otherwise turns the selects below back into
    // the one branch they avoid.
    uint64_t active = pending_.active ? 1 : 0;
    asm("" : "+r"(active));
    FlowEvent* slot = queue_->Spare();
    slot->kind = pending_.kind;
    slot->gap_cause = GapCause::kDecodeError;
    slot->inline_depth = 0;
    slot->time_ns = 0;
    slot->from = pending_.from;
    slot->to = block.ip;
    slot->call_size = pending_.call_size;
    slot->insn_count = position_ - last_event_position_;
    slot->detail = EventText{};
    queue_->Commit(active);
    const uint64_t keep_mask = uint64_t{0} - active;
    last_event_position_ = (position_ & keep_mask) | (last_event_position_ & ~keep_mask);
    inline_after_transfer_ = inline_after_transfer_ | (active != 0);  // (pending: no kInlineChange)
    pending_.active = false;
    if (WaitingCount() >= kMaxWaiting) [[unlikely]] FlushExtrapolated();
  }
  if (code_facts_ != nullptr) {
    // The common case inline: the block lies in the stretch of the block before, at one depth,
    // and that depth needs no restating (QueueInlineChanges would queue nothing). (Unsigned
    // differences: one compare per end, and an empty window contains nothing.)
    const uint64_t width = fast_end_ - fast_begin_;
    const bool inside = block.ip - fast_begin_ < width && block.end_ip - fast_begin_ < width;
    if (inside && !RestatesDepth(inline_after_transfer_, inline_depth_, fast_depth_)) {
      inline_after_transfer_ = false;
    } else {
      QueueInlineChanges(block, position_);
    }
  }
  position_ += block.ninsn;  // (stats_.instructions is position_: see FinishSegment)
  last_end_ip_ = block.end_ip;
  const size_t iclass = static_cast<size_t>(block.iclass);
  BranchClass branch_class = iclass < kIclasses ? kClassOfIclass[iclass] : BranchClass::kOther;
  bool call = branch_class == BranchClass::kCall;
  // (A mask, not `call ? index : 0`, which GCC compiles to a branch.)
  const uint32_t pid = image_.pid();
  const size_t slot_index = static_cast<size_t>(
      ((block.end_ip * 0x9E3779B97F4A7C15ull) >> (64 - BlockInlineCache::kCallLengthBits)) &
      (uint64_t{0} - static_cast<uint64_t>(call)));
  BlockInlineCache::CallLength& known = block_inline_->call_lengths[slot_index];
  const bool hit = (known.end_ip == block.end_ip) & (known.pid == pid);
  uint8_t size = known.size;
  if ((call & !hit) | (block.iclass == ptic_error)) [[unlikely]] {
    BranchInsn insn = ClassifyLast(block);
    if (block.iclass == ptic_error) branch_class = insn.branch_class;
    call = branch_class == BranchClass::kCall;
    size = insn.size;
    if (call && insn.size != 0 && block.iclass != ptic_error) known = {block.end_ip, pid, insn.size};
  }
  last_class_ = branch_class;
  // ResolvePending (above) left no branch pending: set one up for the next block without a
  // switch (the fields of an inactive one are never read).
  const BlockEnd end = kBlockEnds[static_cast<size_t>(branch_class)];
  pending_.active = end.pending;
  pending_.kind = end.kind;
  pending_.from = block.end_ip;
  pending_.call_size = call ? size : 0;
}

void FlowDecoder::HandleError(int error, const pt_block& block, uint64_t offset) {
  if (error == -pte_eos) return;
  uint64_t at = block.ninsn == 0 ? block.ip : 0;
  ResolvePending(at);
  FlushExtrapolated();
  std::string detail;
  GapCause cause = GapCause::kDecodeError;
  if (error == -pte_nomap) {
    cause = GapCause::kMissingCode;
    std::vector<uint64_t>& ips = stats_.missing_code_ips;
    if (at != 0 && ips.size() < 16 && std::find(ips.begin(), ips.end(), at) == ips.end()) {
      ips.push_back(at);
    }
    char text[96];
    std::snprintf(text, sizeof text, "no code bytes for 0x%llx (module not found or not mapped)",
                  static_cast<unsigned long long>(at));
    detail = text;
  } else {
    detail = std::string(pt_errstr(pt_errcode(error))) + " at trace offset " +
             std::to_string(offset + offset_base_);
    if (stats_.first_error.empty()) stats_.first_error = detail;
  }
  QueueGap(cause, 0, std::move(detail));
  FlushExtrapolated();
  have_anchor_ = false;
}

// QueueAt's work; inlined into ResolvePending, which queues nearly every event (a call into
// QueueAt, with its six arguments, cost a fifth of the event's instructions).
[[gnu::always_inline]] inline void FlowDecoder::AppendEvent(uint64_t position, FlowEvent::Kind kind,
                                                            uint64_t from, uint64_t to,
                                                            uint8_t call_size,
                                                            uint32_t inline_depth) {
  // In unit mode events wait for their time in place, in the unit's buffer (no copy later).
  FlowEvent& event = queue_->emplace_back();
  event.kind = kind;
  event.from = from;
  event.to = to;
  event.call_size = call_size;
  event.inline_depth = inline_depth;
  if (kind != FlowEvent::Kind::kInlineChange) inline_after_transfer_ = true;
  event.insn_count = position - last_event_position_;
  last_event_position_ = position;
  if (WaitingCount() >= kMaxWaiting) FlushExtrapolated();
}

void FlowDecoder::ResolvePending(uint64_t target) {
  if (!pending_.active) return;
  pending_.active = false;
  AppendEvent(position_, pending_.kind, pending_.from, target, pending_.call_size, 0);
}

void FlowDecoder::Queue(FlowEvent::Kind kind, uint64_t from, uint64_t to, uint8_t call_size) {
  QueueAt(position_, kind, from, to, call_size, 0);
}

void FlowDecoder::QueueAt(uint64_t position, FlowEvent::Kind kind, uint64_t from, uint64_t to,
                          uint8_t call_size, uint32_t inline_depth) {
  AppendEvent(position, kind, from, to, call_size, inline_depth);
}

size_t FlowDecoder::WaitingCount() const {
  return queue_->size() - first_waiting_;  // (first_waiting_ stays 0 outside unit mode)
}

void FlowDecoder::ClearWaiting() {
  if (buffer_ != nullptr) {
    first_waiting_ = buffer_->events.size();
  } else {
    waiting_.clear();
  }
  waiting_base_ = last_event_position_;  // the last waiting event's position
}

void FlowDecoder::QueueGap(GapCause cause, uint64_t resume_ip, std::string detail) {
  Queue(FlowEvent::Kind::kGap, 0, resume_ip);
  inline_depth_ = 0;  // the stack tracker closes everything at a gap
  FlowEvent& gap = queue_->back();
  gap.gap_cause = cause;
  gap.detail = std::move(detail);
  stats_.counts[GapStat(cause)]++;
}

template <typename TimeOf>
void FlowDecoder::EmitWaiting(const TimeOf& time_of) {
  uint64_t position = waiting_base_;
  if (buffer_ == nullptr) {
    for (FlowEvent& event : waiting_) {
      position += event.insn_count;
      Emit(event, time_of(position));
    }
    ClearWaiting();
    return;
  }
  // Unit mode, nearly every event: Emit's work with the state in registers (times never go back,
  // so the first event's time is the smallest).
  FlowEvent* event = buffer_->events.data() + first_waiting_;
  FlowEvent* const end = buffer_->events.data() + buffer_->events.size();
  if (event == end) return;
  stats_.events += static_cast<uint64_t>(end - event);
  uint64_t last_ns = last_emitted_ns_;
  position += event->insn_count;
  last_ns = std::max(time_of(position), last_ns);
  event->time_ns = last_ns;
  stats_.first_ns = std::min(stats_.first_ns, last_ns);
  for (++event; event != end; ++event) {
    position += event->insn_count;
    last_ns = std::max(time_of(position), last_ns);
    event->time_ns = last_ns;
  }
  last_emitted_ns_ = stats_.last_ns = last_ns;
  ClearWaiting();
}

void FlowDecoder::Anchor(uint64_t tsc) {
  uint64_t ns = setup_.time.ToNs(tsc);
  if (have_anchor_ && ns < anchor_ns_) ns = anchor_ns_;
  const uint64_t span = position_ - anchor_position_;
  if (have_anchor_ && span != 0) {
    const uint64_t step_ns = ns - anchor_ns_, from_position = anchor_position_, from_ns = anchor_ns_;
    EmitWaiting([=](uint64_t position) {
      return from_ns + MulDiv(step_ns, position - from_position, span);
    });
  } else {
    EmitWaiting([=](uint64_t) { return ns; });
  }
  if (have_anchor_ && position_ > anchor_position_) {
    rate_ns_ = ns - anchor_ns_;
    rate_insns_ = position_ - anchor_position_;
  }
  have_anchor_ = true;
  anchor_ns_ = ns;
  anchor_position_ = position_;
  image_.SetTime(ns);
  if (Decoding() && image_.NeedsSwitch(ns)) SwitchImageIfNeeded(ns);
}

void FlowDecoder::FlushExtrapolated() {
  const uint64_t from_ns = anchor_ns_;
  if (have_anchor_ && rate_insns_ != 0) {
    const uint64_t rate_ns = rate_ns_, rate_insns = rate_insns_, from_position = anchor_position_;
    EmitWaiting([=](uint64_t position) {
      return from_ns + MulDiv(rate_ns, position - from_position, rate_insns);
    });
  } else {
    EmitWaiting([=](uint64_t) { return from_ns; });
  }
}

// Not in unit mode (in unit mode the event already sits in the buffer: see EmitWaiting).
void FlowDecoder::Emit(FlowEvent& event, uint64_t time_ns) {
  if (time_ns < last_emitted_ns_) time_ns = last_emitted_ns_;  // non-decreasing per thread
  DeliverDueTriggers(triggers_, &next_trigger_, time_ns, last_emitted_ns_,
                     [this](FlowEvent& trigger) { out_.OnFlowEvent(trigger); });
  event.time_ns = time_ns;
  last_emitted_ns_ = time_ns;
  if (time_ns < stats_.first_ns) stats_.first_ns = time_ns;
  stats_.last_ns = time_ns;
  stats_.events++;
  out_.OnFlowEvent(event);
}

void FlowDecoder::SwitchImageIfNeeded(uint64_t time_ns) {
  bool changed = false;
  pt_image* image = image_.At(time_ns, &changed);
  if (changed && decoder_ != nullptr) pt_blk_set_image(decoder_, image);
  if (changed && walker_ != nullptr) walker_->CodeChanged();
}

void FlowDecoder::LostData(const std::string& detail) {
  ResolvePending(0);
  FlushExtrapolated();
  QueueGap(GapCause::kLostData, 0, detail);
  FlushExtrapolated();
  have_anchor_ = false;
}

void FlowDecoder::Finish() {
  ResolvePending(0);
  FlushExtrapolated();
  Queue(FlowEvent::Kind::kEnd, last_end_ip_, 0);
  FlushExtrapolated();
}

}  // namespace ptscope::decode
