// The block loop, block classification and the unit's events (see flow_decoder.h).
#include "flow/flow_decoder.h"

#include <algorithm>
#include <array>
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

}  // namespace

FlowDecoder::FlowDecoder(const DecoderSetup& setup, const CodeImages& images, uint32_t pid,
                         BlockFacts& facts, UnitEvents& out)
    : setup_(setup), out_(out), facts_(facts), image_(images, pid) {}

uint64_t FlowDecoder::ImageTime() const {
  return clock_.have_anchor() ? clock_.anchor_ns() : kNoTime;
}

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
  if (!blocks_.Open(config)) {
    FailSegment("libipt refused the decoder configuration");
    return;
  }
  inline_.RefreshFast(image_.pid());  // another decoder of this worker may have moved the stretch
  if (facts_.functions == nullptr) {
    facts_.functions = std::make_unique<BlockFacts::FunctionAt[]>(size_t{1}
                                                                   << BlockFacts::kFunctionBits);
  }
  if (facts_.call_lengths == nullptr) {
    facts_.call_lengths = std::make_unique<BlockFacts::CallLength[]>(BlockFacts::kCallLengthSlots);
  }
  int status = blocks_.SyncForward();
  if (status < 0) {
    QueueGap(GapCause::kDecodeError, 0,
             "no PSB in " + std::to_string(size) + " bytes of trace: nothing to decode");
  }
  bool synced = status >= 0;
  while (synced) {
    uint64_t tsc = 0;
    uint32_t lost_mtc = 0, lost_cyc = 0;
    if (blocks_.Time(&tsc, &lost_mtc, &lost_cyc) >= 0 && tsc != 0) Anchor(tsc);
    // Without any time yet, take the mappings in force at the end of the capture.
    const uint64_t image_time = ImageTime();
    if (cpu_.following()) UpdateThread(image_time);
    if (image_.NeedsSwitch(image_time)) SwitchImageIfNeeded(image_time);
    for (;;) {
      // The run the walker stopped at after quiet blocks: NextBlock's, without a second probe.
      const WalkerRun* next_run = nullptr;
      // Nearly every block leaves status 0: one test for the three below.
      if (status != 0) [[unlikely]] {
        if ((status & pts_event_pending) != 0) status = DrainEvents(status);
        if (status < 0 || (status & pts_eos) != 0) break;
      } else if (pending_.cond) {
        next_run = TakeQuietBlocks();
      }
      pt_block block;  // pt_blk_next zeroes it first, also when it fails
      uint8_t call_size = 0;
      status = blocks_.NextBlock(&block, &call_size, next_run);
      if (block.ninsn > 0) HandleBlock(block, call_size);
      if (status >= 0 && position_ >= stuck_.next && Stuck()) status = -pte_internal;
      if (status < 0) {
        uint64_t offset = 0;
        blocks_.Offset(&offset);
        HandleError(status, block, offset);
        break;
      }
    }
    if (status == -pte_eos || (status >= 0 && (status & pts_eos) != 0)) break;
    if (status >= 0) break;
    // Resync at the next PSB after the one we last synced at (libipt's own sync_forward would
    // start after its look-ahead and can skip a PSB).
    uint64_t last_sync = 0, current = 0;
    if (blocks_.SyncOffset(&last_sync) < 0) last_sync = UINT64_MAX;
    if (blocks_.Offset(&current) < 0) current = 0;
    int64_t next = ResyncOffset(begin, size, current, last_sync);
    status = next < 0 ? -pte_eos : blocks_.SyncSet(static_cast<uint64_t>(next));
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
  // The unit was decoded through the next unit's PSB+ header, so libipt stopped exactly where the
  // next unit starts: a branch still waiting for its target goes there. (The header's TSC is not
  // used as an anchor: see unit_clock.h.)
  ResolvePending(next_unit_.valid ? next_unit_.ip : 0);
  FlushExtrapolated();
  blocks_.Close();
  stats_.instructions = position_;  // every instruction retired is counted in position_
  out_.stats = stats_;
  out_.last_end_ip = pending_.from;  // the last block's end (see PendingBranch::from)
  out_.trailing_insns = position_ - last_event_position_;
  out_.end_ns = clock_.EndNs(position_);
}

void FlowDecoder::UpdateThread(uint64_t time_ns) {
  ThreadKey thread;
  const CpuFollower::Change change = cpu_.Update(time_ns, &thread);
  if (change == CpuFollower::Change::kNone) return;
  // A thread switched in may have run on another CPU since it last ran here, whose stream this
  // decoder does not see: its inlined depth is not known, and its first block states it.
  if (change == CpuFollower::Change::kSwitchedIn) inline_.Unknown();
  // A run with neither events nor instructions yet is the new thread's.
  const size_t first = out_.events.size(), first_insn = out_.insns.size();
  if (!out_.runs.empty() && out_.runs.back().first == first &&
      out_.runs.back().first_insn == first_insn) {
    out_.runs.back().thread = thread;
    out_.runs.back().time_ns = time_ns;
  } else {
    out_.runs.push_back(UnitEvents::Run{thread, first, first_insn, time_ns});
  }
  if (thread.pid != image_.pid()) {
    function_ = {};  // another address space
    image_.SetPid(thread.pid);
    inline_.RefreshFast(thread.pid);
    if (blocks_.active()) SwitchImageIfNeeded(time_ns);
  }
}

bool FlowDecoder::Stuck() {
  // Checked every few thousand instructions, by position_, which the block loop keeps anyway:
  // asking libipt for its offset after every block cost a few percent of a decode, and even a
  // per-block counter cost 1%.
  constexpr uint64_t kMaxInsnsWithoutTrace = uint64_t{1} << 20;
  constexpr uint64_t kCheckInterval = uint64_t{1} << 12;
  stuck_.next = position_ + kCheckInterval;
  uint64_t offset = 0;
  blocks_.Offset(&offset);
  if (offset != stuck_.offset) {
    stuck_.offset = offset;
    stuck_.position = position_;
    return false;
  }
  if (position_ - stuck_.position < kMaxInsnsWithoutTrace) return false;
  stuck_.position = position_;
  if (stats_.first_error.empty()) {
    stats_.first_error = "decoding looped without consuming trace at offset " +
                         std::to_string(offset + offset_base_) + " (damaged trace?)";
  }
  return true;
}

int FlowDecoder::DrainEvents(int status) {
  while (status >= 0 && (status & pts_event_pending) != 0) {
    // Most events are the walker's ticks: their time without a pt_event (HandleEvent's case).
    bool has_tsc = false;
    uint64_t tsc = 0;
    pt_event event;
    const bool tick = blocks_.NextTick(&status, &has_tsc, &tsc);
    if (!tick) status = blocks_.NextEvent(&event);
    if (status < 0) {
      uint64_t offset = 0;
      blocks_.Offset(&offset);
      pt_block none;
      std::memset(&none, 0, sizeof none);
      HandleError(status, none, offset);
      return status;
    }
    if (tick) {
      if (has_tsc) Anchor(tsc);
    } else {
      HandleEvent(event);
    }
  }
  return status;
}

void FlowDecoder::HandleEvent(const pt_event& event) {
  switch (event.type) {
    case ptev_enabled:
      if (event.has_tsc) Anchor(event.tsc);
      if (cpu_.following() && !event.status_update) {
        // Tracing resumes after a context switch on this CPU: who runs now?
        uint64_t tsc = 0;
        uint32_t lost_mtc = 0, lost_cyc = 0;
        if (!event.has_tsc && blocks_.Time(&tsc, &lost_mtc, &lost_cyc) >= 0 && tsc != 0) {
          Anchor(tsc);
        }
        UpdateThread(ImageTime());
      }
      if (!event.status_update) {
        pending_.cond = false;
        Queue(FlowEvent::Kind::kEnable, 0, event.variant.enabled.ip);
      }
      break;
    case ptev_disabled: {
      uint64_t resume = event.ip_suppressed ? 0 : event.variant.disabled.ip;
      ResolvePending(resume);
      bool syscall = last_class_ == BranchClass::kFarCall;
      Queue(syscall ? FlowEvent::Kind::kSyscall : FlowEvent::Kind::kDisable, pending_.from, resume);
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
      clock_.Forget();
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

BranchInsn FlowDecoder::BranchAt(uint64_t ip, int isid) {
  auto [cached, inserted] = facts_.branches.TryEmplace(BlockKey{image_.pid(), ip});
  if (!inserted) return *cached;
  uint8_t bytes[15];
  int read = pt_iscache_read(image_.iscache(), bytes, sizeof bytes, isid, ip);
  if (read <= 0) read = static_cast<int>(image_.ReadJit(bytes, sizeof bytes, ip));
  *cached = read <= 0 ? BranchInsn{} : ClassifyBranch(bytes, static_cast<size_t>(read));
  return *cached;
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
  auto [cached, inserted] = facts_.branches.TryEmplace(BlockKey{image_.pid(), block.end_ip});
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
// buffer's spare slot and kept or not (EventBuffer::Commit), and the length of a call comes with
// the block (`call_size`, the walker's run has it) or, when the block source does not know it
// (0), from a direct-mapped table. The two branches this replaced cost 1.1 mispredicts per block
// between them (callgrind --branch-sim=yes on a pt-synth capture: 0.83M and 0.63M for 1.34M
// blocks).
[[gnu::always_inline]] inline void FlowDecoder::HandleBlock(const pt_block& block,
                                                            uint8_t call_size) {
  {
    // ResolvePending's work (AppendEvent's, for a pending branch), whether or not one is pending.
    // As a number hidden from the optimizer, which otherwise turns the selects below back into
    // the one branch they avoid.
    uint64_t active = pending_.active ? 1 : 0;
    // A conditional branch (about half the blocks end with one) costs two compares here when it
    // stays in the function whose bounds are carried; leaving it is rare.
    if (pending_.cond && !(function_.Contains(last_target_) & function_.Contains(block.ip)))
        [[unlikely]] {
      active = LeavesFunction(block.ip) ? 1 : 0;
    }
    asm("" : "+r"(active));
    EventBuffer& events = out_.events;
    FlowEvent* slot = events.Spare();
    slot->kind = pending_.kind;
    slot->gap_cause = GapCause::kDecodeError;
    slot->inline_depth = 0;
    slot->time_ns = 0;
    slot->from = pending_.from;
    slot->to = block.ip;
    slot->call_size = pending_.call_size;
    slot->insn_count = position_ - last_event_position_;
    slot->detail = EventText{};
    events.Commit(active);
    const uint64_t keep_mask = uint64_t{0} - active;
    last_event_position_ = (position_ & keep_mask) | (last_event_position_ & ~keep_mask);
    last_target_ = (block.ip & keep_mask) | (last_target_ & ~keep_mask);
    inline_.Transfer(active != 0);  // (a pending branch is never a kInlineChange)
    pending_.active = false;
    if (clock_.Waiting(events) >= kMaxWaiting) [[unlikely]] FlushExtrapolated();
  }
  if (inline_.enabled() && !inline_.Quiet(block)) {
    inline_.StateBlock(block, position_, image_, clock_.have_anchor() ? clock_.anchor_ns() : 0,
                       [this](uint64_t position, uint64_t ip, uint32_t depth) {
                         AppendEvent(position, FlowEvent::Kind::kInlineChange, ip, ip, 0, depth);
                       });
  }
  if (list_insns_) [[unlikely]] ListBlock(block);
  position_ += block.ninsn;  // (stats_.instructions is position_: see FinishSegment)
  const size_t iclass = static_cast<size_t>(block.iclass);
  BranchClass branch_class = iclass < kIclasses ? kClassOfIclass[iclass] : BranchClass::kOther;
  bool call = branch_class == BranchClass::kCall;
  uint8_t size = call_size;
  // The walker's blocks (nearly all) come with their call's length; libipt's, and the walker's
  // blocks that were not one run (on the way to an event), probe the table of call lengths.
  // (`call_size` is 0 for a block that does not end in a call: BlockSource::NextBlock.)
  if ((call & (size == 0)) | (block.iclass == ptic_error)) [[unlikely]] {
    size = CallLengthOf(block, &branch_class);
    call = branch_class == BranchClass::kCall;
    if (!call) size = 0;
  }
  last_class_ = branch_class;
  // ResolvePending (above) left no branch pending: set one up for the next block without a
  // switch (the fields of an inactive one are never read, but `from`: the last block's end).
  const BlockEnd end = kBlockEnds[static_cast<size_t>(branch_class)];
  pending_.active = end.pending;
  pending_.cond = branch_class == BranchClass::kCondJump;
  pending_.isid = block.isid;
  pending_.kind = end.kind;
  pending_.from = block.end_ip;
  pending_.call_size = size;
}

// Inlined into DecodeSegment's loop. Many blocks after a conditional branch end at another one
// whose bit was cached after a quiet tick, start in the same function and need no inlined depth
// stated: nothing comes of them but their instructions (on a pt-synth capture 30% of the blocks,
// in chains of 2 on average; in a pt-emulate capture of a static program 77%, chains of 13).
// Each went through the whole loop (the block's fields, the status tests, HandleBlock's slot and
// tables) only to add to position_; the walker now steps through them in one call, and they leave
// exactly what HandleBlock and the stuck check would have left.
[[gnu::always_inline]] inline const WalkerRun* FlowDecoder::TakeQuietBlocks() {
  // pending_.cond: the last block ended in a conditional branch (so pending_.active is false and
  // a block makes no event unless HandleBlock's function test fails).
  QueryWalker::QuietBounds bounds;  // without CodeFacts: anywhere (LeavesFunction says no)
  if (code_ != nullptr) {
    // HandleBlock's test without LeavesFunction: last_target_ stays put while no event comes.
    if (!function_.Contains(last_target_)) return nullptr;
    bounds.start_begin = function_.start;
    bounds.start_width = function_.size;
    if (!inline_.QuietWindow(&bounds.begin, &bounds.width)) return nullptr;
  }
  // The stuck check runs after the block that reaches stuck_.next: that one is NextBlock's.
  if (list_insns_ || position_ >= stuck_.next) return nullptr;
  const QueryWalker::QuietBlocks taken = blocks_.NextQuiet(bounds, stuck_.next - position_);
  if (taken.ninsn == 0) return taken.next;
  position_ += taken.ninsn;
  // HandleBlock's pending_ for a block ending in a conditional branch: the rest is as it was.
  pending_.from = taken.end_ip;
  pending_.isid = taken.isid;
  if (code_ != nullptr) inline_.QuietBlocks();
  return taken.next;
}

uint8_t FlowDecoder::CallLengthOf(const pt_block& block, BranchClass* branch_class) {
  const uint32_t pid = image_.pid();
  BlockFacts::CallLength& known = facts_.call_lengths[(block.end_ip * 0x9E3779B97F4A7C15ull) >>
                                                      (64 - BlockFacts::kCallLengthBits)];
  if (block.iclass != ptic_error && known.end_ip == block.end_ip && known.pid == pid) {
    return known.size;
  }
  const BranchInsn insn = ClassifyLast(block);
  if (block.iclass == ptic_error) {
    *branch_class = insn.branch_class;
  } else if (insn.size != 0) {
    known = {block.end_ip, pid, insn.size};
  }
  return insn.size;
}

void FlowDecoder::ListBlock(const pt_block& block) {
  // Instruction lengths, decoded once per block start; the last
  // instruction is the block's end_ip, whatever its bytes (libipt may have had them from `raw`).
  auto [layout, inserted] = facts_.layouts.TryEmplace(BlockKey{image_.pid(), block.ip});
  const bool known = !inserted && layout->size() >= block.ninsn &&
                     block.ip + (*layout)[block.ninsn - 1] == block.end_ip;
  if (!known) {
    layout->clear();
    uint64_t ip = block.ip;
    for (uint32_t index = 0; index + 1 < block.ninsn; ++index) {
      layout->push_back(static_cast<uint32_t>(ip - block.ip));
      const uint8_t length = image_.InsnLength(block, ip);
      if (length == 0) break;  // (libipt decoded these bytes: only a changed JIT region can)
      ip += length;
    }
    layout->resize(block.ninsn - 1, static_cast<uint32_t>(ip - block.ip));
    layout->push_back(static_cast<uint32_t>(block.end_ip - block.ip));
  }
  for (uint32_t index = 0; index < block.ninsn; ++index) {
    out_.insns.push_back(block.ip + (*layout)[index]);
  }
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
  clock_.Forget();
}

// Inlined into ResolvePending, which queues nearly every event (a call, with its six arguments,
// cost a fifth of the event's instructions).
[[gnu::always_inline]] inline void FlowDecoder::AppendEvent(uint64_t position, FlowEvent::Kind kind,
                                                            uint64_t from, uint64_t to,
                                                            uint8_t call_size,
                                                            uint32_t inline_depth) {
  // Events wait for their time in place, in the unit's buffer (no copy later).
  FlowEvent& event = out_.events.emplace_back();
  event.kind = kind;
  event.from = from;
  event.to = to;
  event.call_size = call_size;
  event.inline_depth = inline_depth;
  inline_.Transfer(kind != FlowEvent::Kind::kInlineChange);
  event.insn_count = position - last_event_position_;
  last_event_position_ = position;
  if (clock_.Waiting(out_.events) >= kMaxWaiting) FlushExtrapolated();
}

FunctionBounds FlowDecoder::FunctionAt(uint64_t ip) {
  const uint32_t pid = image_.pid();
  BlockFacts::FunctionAt& known =
      facts_.functions[(ip * 0x9E3779B97F4A7C15ull) >> (64 - BlockFacts::kFunctionBits)];
  if (known.ip != ip || known.pid != pid) {
    const auto [start, end] = code_->FunctionRange(pid, ip, ImageTime());
    known = {ip, pid, start == 0 ? FunctionBounds{} : FunctionBounds{start, end - start}};
  }
  return known.bounds;
}

bool FlowDecoder::LeavesFunction(uint64_t to) {
  if (code_ == nullptr) return false;
  // At a segment's start (or after a gap) the branch's own function is the current one.
  if (last_target_ == 0) last_target_ = pending_.from;
  if (!function_.Contains(last_target_)) function_ = FunctionAt(last_target_);
  if (function_.Contains(to)) return false;
  // Outside: into another known function (not padding or unknown code, which the tracker would
  // not name either). That function is the current one after the event.
  const FunctionBounds target = FunctionAt(to);
  if (target.size == 0) return false;
  // Not taken, the branch fell through into the next function (code that runs on from its
  // function's end, as __memset_chk_erms into __memset_erms): no branch went there, so, as for
  // code that falls through without a branch, no event (magic-trace's rule is the same).
  if (to == pending_.from + BranchAt(pending_.from, pending_.isid).size) return false;
  function_ = target;
  return true;
}

void FlowDecoder::ResolvePending(uint64_t target) {
  pending_.cond = false;  // (a conditional branch needs its target block)
  if (!pending_.active) return;
  pending_.active = false;
  last_target_ = target;
  AppendEvent(position_, pending_.kind, pending_.from, target, pending_.call_size, 0);
}

void FlowDecoder::Queue(FlowEvent::Kind kind, uint64_t from, uint64_t to) {
  last_target_ = to;  // (0 after a gap: the next conditional branch's function, then)
  AppendEvent(position_, kind, from, to, 0, 0);
}

void FlowDecoder::QueueGap(GapCause cause, uint64_t resume_ip, std::string detail) {
  Queue(FlowEvent::Kind::kGap, 0, resume_ip);
  inline_.Reset();  // the stack tracker closes everything at a gap
  FlowEvent& gap = out_.events.back();
  gap.gap_cause = cause;
  gap.detail = std::move(detail);
  stats_.counts[GapStat(cause)]++;
}

void FlowDecoder::Anchor(uint64_t tsc) {
  const uint64_t ns = clock_.Anchor(setup_.time.ToNs(tsc), position_, out_.events, stats_);
  image_.SetTime(ns);
  if (blocks_.active() && image_.NeedsSwitch(ns)) SwitchImageIfNeeded(ns);
}

void FlowDecoder::SwitchImageIfNeeded(uint64_t time_ns) {
  bool changed = false;
  pt_image* image = image_.At(time_ns, &changed);
  if (changed) {
    function_ = {};  // other mappings
    blocks_.ImageChanged(image);
  }
}

}  // namespace ptscope::decode
