// QueryWalker's block step (see query_walker.h): NextInline and what it inlines, in a header so
// that FlowDecoder's block loop (through BlockSource) takes a block with no call into the walker:
// the call, with its register saves and the reloads after it, cost ~30 instructions a block.
// Proceed, ProceedNoEvent, CondBranch and PushReturn are always_inline for the same reason.
#pragma once

#include <algorithm>
#include <cstring>

#include "flow/query_walker.h"

namespace ptscope::decode {

[[gnu::always_inline]] inline int QueryWalker::NextInline(pt_block* __restrict block,
                                                         const WalkerRun* at) {
  std::memset(block, 0, sizeof *block);
  block->ip = ip_;
  block->mode = mode_;
  last_call_size_ = 0;
  // block->speculative stays 0: TSX is not modelled (MODE.TSX and TSX events are refused), so
  // no block is speculative.
  return Proceed(block, at);
}

[[gnu::always_inline]] inline QueryWalker::QuietBlocks QueryWalker::NextQuiet(
    const QuietBounds& bounds, uint64_t budget) {
  QuietBlocks taken;
  // Proceed's way to a quiet block, once for all of them: no event ahead, tracing enabled (which
  // tick_quiet_ implies), a bit cached after a quiet Tick. Each quiet block leaves these as they
  // were (status_ 0, tick_quiet_ set, nothing fetched), so they hold for the next one.
  PacketQuery* packets = packets_.get();
  if (!tick_quiet_ || packets == nullptr || EventAhead()) return taken;
  uint64_t index = packets->tnt_index();
  if (index <= 1) return taken;
  // RunAt's fast path and ProceedNoEvent's test of the run: a run NextInline would take another
  // way (not cached yet, slow, reaching the section's end) ends the walk, and NextInline takes
  // it. One window for a block's first address, the section's and both of `bounds`; one limit
  // for its last, which is at or after the first in a run that is not slow: the section's end
  // and the window's. (Fewer values in registers: the loop is inlined into a large function.)
  const uint64_t section_begin = last_section_begin_, section_end = last_section_end_;
  const uint64_t first_begin = std::max({section_begin, bounds.start_begin, bounds.begin});
  const uint64_t first_end = std::min({section_end, bounds.start_begin + bounds.start_width,
                                       bounds.begin + bounds.width});
  const uint64_t first_width = first_end > first_begin ? first_end - first_begin : 0;
  const uint64_t last_end = std::min(section_end, bounds.begin + bounds.width);
  const uint64_t bits = packets->tnt_bits();
  const RunTable& runs = cache_->runs;
  const int isid = last_isid_;
  uint64_t ip = ip_;
  while (ip - first_begin < first_width) {
    const Run* run = runs.Find(ip, isid);
    if (run == nullptr || run->slow || run->iclass != ptic_cond_jump || run->end_ip >= last_end ||
        taken.ninsn + run->ninsn >= budget) {
      // RunAt's answer at `ip`: inside the section's window, run (or none: then RunAtSlow's).
      taken.next = run;
      break;
    }
    taken.ninsn += run->ninsn;
    taken.end_ip = run->end_ip;
    ip = (bits & index) != 0 ? run->target : run->end_ip + run->size;
    index >>= 1;
    if (index <= 1) break;
  }
  if (taken.ninsn == 0) return taken;  // (a run has an instruction at least; ip_ is `ip`)
  ip_ = ip;
  status_ = 0;
  packets->SetTntIndex(index);
  taken.isid = isid;  // (the runs' own: RunTable::Find matched it)
  return taken;
}

[[gnu::always_inline]] inline int QueryWalker::Proceed(pt_block* block, const Run* at) {
  if (EventAhead()) [[unlikely]] {
    const int fetched = FetchEvent();
    if (fetched != 0) return fetched < 0 ? fetched : ProceedEvent(block);
  }
  if (!enabled_) return (status_ & pts_eos) != 0 ? -pte_eos : -pte_no_enable;
  const int status = ProceedNoEvent(block, at);
  if (status != 0) return status == kQuietBlock ? 0 : status;
  // ProceedTrailingEvent, knowing that tracing is enabled (only events change that): Status(0)
  // is the end-of-stream flag then.
  if (!EventAhead()) [[likely]] return status_ & pts_eos;
  return ProceedTrailingEventSlow();
}

[[gnu::always_inline]] inline void QueryWalker::PushReturn(uint64_t ip) {
  returns_[return_top_] = ip;
  return_top_ = static_cast<uint8_t>(return_top_ + 1 == kReturnSlots ? 0 : return_top_ + 1);
  if (return_top_ == return_bottom_) {  // full: the oldest entry goes
    return_bottom_ =
        static_cast<uint8_t>(return_bottom_ + 1 == kReturnSlots ? 0 : return_bottom_ + 1);
  }
}

[[gnu::always_inline]] inline int QueryWalker::PopReturn(uint64_t* ip) {
  if (return_top_ == return_bottom_) return -pte_retstack_empty;
  return_top_ = static_cast<uint8_t>(return_top_ == 0 ? kReturnSlots - 1 : return_top_ - 1);
  *ip = returns_[return_top_];
  return 0;
}

[[gnu::always_inline]] inline int QueryWalker::ProceedNoEvent(pt_block* block,
                                                             const Run* at) {
  const Run& run = at != nullptr ? *at : RunAt(ip_);
  // (A run decoded in another epoch may reach into a section this epoch lays over its end.)
  if (run.slow || run.end_ip >= last_section_end_) [[unlikely]] {
    if (run.unsupported) return kUnsupported;  // (also a run of kMaxRunInsns or more)
    return ProceedNoEventSlow(block);
  }
  block->isid = run.isid;
  block->ninsn = run.ninsn;
  block->end_ip = run.end_ip;
  block->iclass = static_cast<pt_insn_class>(run.iclass);
  const uint64_t next = run.end_ip + run.size;
  switch (run.iclass) {
    case ptic_call:
      last_call_size_ = run.call_size;
      if (!(run.direct && run.target == next)) PushReturn(next);
      if (run.direct) {
        ip_ = run.target;
        return 0;
      }
      break;
    case ptic_jump:
      if (run.direct) {
        ip_ = run.target;
        return 0;
      }
      break;
    case ptic_ptwrite:
      return kUnsupported;
    case ptic_return: {  // ProceedWithTrace's case, inlined
      ip_ = run.end_ip;
      int taken = 0;
      int status = CondBranch(&taken);
      if (status >= 0) {
        if (!taken) return -pte_bad_retcomp;
        const int popped = PopReturn(&ip_);
        if (popped < 0) return popped;
      } else {
        if (status != -pte_bad_query) return status;
        status = IndirectBranch(&ip_);  // not compressed: its TIP
        if (status < 0) return status;
      }
      status_ = status;
      return (status & pts_ip_suppressed) != 0 ? -pte_noip : 0;
    }
    case ptic_cond_jump: {  // about two blocks in three: ProceedWithTrace's case, inlined
      int taken = 0;
      // Most often a cached bit after a quiet Tick (see tick_quiet_): no tick, status 0, and no
      // event ahead (tick_quiet_ holds only while none is in process, and status_ becomes 0).
      if (tick_quiet_ && packets_ != nullptr && packets_->CachedCondBranch(&taken)) [[likely]] {
        ip_ = taken ? run.target : next;
        status_ = 0;
        return kQuietBlock;
      }
      ip_ = run.end_ip;  // where libipt stands when it asks for trace (the tick's ip)
      const int status = CondBranch(&taken);
      if (status < 0) return status;
      ip_ = taken ? run.target : next;
      status_ = status;
      return (status & pts_ip_suppressed) != 0 ? -pte_noip : 0;
    }
    default:
      break;
  }
  Insn insn;
  insn.ip = run.end_ip;
  insn.size = run.size;
  insn.iclass = static_cast<pt_insn_class>(run.iclass);
  insn.direct = run.direct;
  insn.target = run.target;
  ip_ = run.end_ip;  // where libipt stands when it asks for trace (the tick's ip)
  return ProceedWithTrace(insn);
}

[[gnu::always_inline]] inline int QueryWalker::CondBranch(int* taken) {
  if (PacketQuery* packets = packets_.get()) {
    // Our PacketQuery: a cached bit is a shift and a test, and the offset a member read, so
    // Tick's test needs none of the TNT bookkeeping below. (The pointer in a local: `taken`
    // may alias the member, which would be loaded again after each store.)
    // A cached bit moves neither the offset nor the time: when the last Tick found no tick
    // (tick_quiet_), this one would not either, and needs no offset.
    if (tick_quiet_ && packets->CachedCondBranch(taken)) return 0;
    tick_quiet_ = false;  // (the query below may move the offset; Tick sets it again)
    const int status = packets->CondBranch(taken);
    if (status < 0) return status;
    uint64_t offset = 0;
    const bool offset_ok = packets->GetOffset(&offset) >= 0;
    const int tick = Tick(ip_, offset_ok, offset);
    return tick < 0 ? tick : status;
  }
  if (tnt_left_ == 0) [[unlikely]] return CondBranchFill(taken);
  --tnt_left_;  // a cached bit: the offset stays tnt_offset_ (see tnt_left_)
  const int status = pt_qry_cond_branch(query_, taken);
  if (status < 0) return status;
  const int tick = Tick(ip_, true, tnt_offset_);
  return tick < 0 ? tick : status;
}

}  // namespace ptscope::decode
