// QueryWalker (see query_walker.h). The state machine follows the documented behaviour of
// libipt 2.0.5's block decoder (events bind to the ip they name, a synchronous disable binds to
// the next branch that needs trace, tick events when a TNT or TIP moved the time); the
// differential test (tests/decode/query_walker_diff) checks it block for block against libipt.
#include "flow/query_walker.h"
#include "flow/query_walker_step.h"
#include "flow/x86_branch.h"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <cstring>

namespace ptscope::decode {
namespace {

constexpr uint64_t kNowhere = ~uint64_t{0};  // ProceedTo's ip when there is none to reach

// libipt's instruction class of a decoded instruction, and its direct target when it has one.
pt_insn_class ClassOf(const ZydisDecodedInstruction& insn, bool* direct) {
  *direct = false;
  // libipt's pt_instruction_decode (pt_ild.c) classifies no VEX- or EVEX-encoded instruction
  // (`if (ild->u.s.vex) return 0;`): all are ptic_other. Zydis decodes some as branches (Knights
  // Corner's VEX-encoded mask branches, e.g. c5 48 85 ..: a conditional branch to Zydis), met
  // where fuzzed trace jumps into the middle of instructions; taking a TNT bit for one
  // desynchronises the TNT stream.
  if (insn.encoding != ZYDIS_INSTRUCTION_ENCODING_LEGACY &&
      insn.encoding != ZYDIS_INSTRUCTION_ENCODING_3DNOW) {
    return ptic_other;
  }
  const bool far = insn.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
  switch (insn.mnemonic) {
    case ZYDIS_MNEMONIC_CALL:
      if (far) return ptic_far_call;
      *direct = insn.raw.imm[0].is_relative;
      return ptic_call;
    case ZYDIS_MNEMONIC_JMP:
      if (far) return ptic_far_jump;
      *direct = insn.raw.imm[0].is_relative;
      return ptic_jump;
    case ZYDIS_MNEMONIC_RET:
      return far ? ptic_far_return : ptic_return;
    case ZYDIS_MNEMONIC_SYSCALL: case ZYDIS_MNEMONIC_SYSENTER: case ZYDIS_MNEMONIC_INT:
    case ZYDIS_MNEMONIC_INT1: case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INTO:
      return ptic_far_call;
    case ZYDIS_MNEMONIC_SYSRET: case ZYDIS_MNEMONIC_SYSEXIT: case ZYDIS_MNEMONIC_IRET:
    case ZYDIS_MNEMONIC_IRETD: case ZYDIS_MNEMONIC_IRETQ:
      return ptic_far_return;
    case ZYDIS_MNEMONIC_PTWRITE:
      return ptic_ptwrite;
    case ZYDIS_MNEMONIC_XBEGIN: case ZYDIS_MNEMONIC_XEND:
      // Zydis files xbegin (c7 f8 rel) and xend (0f 01 d5) under conditional branches; libipt's
      // instruction decoder (pt_instruction_decode in pt_ild.c) does not: only Jcc, JrCXZ and
      // LOOPcc take a TNT bit, both are ptic_other, and xbegin's fallback is reached by an
      // abort event (MODE.TSX, FUP, TIP), not by a branch bit. Taking a bit for either
      // desynchronises the TNT stream.
      return ptic_other;
    case ZYDIS_MNEMONIC_VMLAUNCH: case ZYDIS_MNEMONIC_VMRESUME: case ZYDIS_MNEMONIC_VMCALL:
    case ZYDIS_MNEMONIC_VMMCALL: case ZYDIS_MNEMONIC_UIRET:
      return ptic_error;  // not modelled: the caller refuses
    default:
      break;
  }
  if (insn.meta.category == ZYDIS_CATEGORY_COND_BR) {
    *direct = true;
    return ptic_cond_jump;
  }
  return ptic_other;
}

int64_t Displacement(const ZydisDecodedInstruction& insn) {
  const unsigned bits = insn.raw.imm[0].size;
  if (bits == 0 || bits >= 64) return static_cast<int64_t>(insn.raw.imm[0].value.u);
  return static_cast<int64_t>(insn.raw.imm[0].value.u << (64 - bits)) >> (64 - bits);
}

}  // namespace

QueryWalker::QueryWalker(const pt_config& config, WalkerCode& code, WalkerCache* cache,
                         bool own_packets)
    : code_(code) {
  if (cache != nullptr) cache_ = cache;
  pt_config query_config = config;
  std::memset(&query_config.flags, 0, sizeof query_config.flags);  // as libipt's block decoder
  if (own_packets) {
    packets_ = std::make_unique<PacketQuery>(query_config);
  } else {
    query_ = pt_qry_alloc_decoder(&query_config);
  }
  auto* zydis = new ZydisDecoder;
  ZydisDecoderInit(zydis, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  // Minimal mode: what ClassOf and Displacement read (length, encoding, mnemonic, meta.category
  // and branch_type, raw.imm) is decoded as in full mode, without the attributes and operand
  // details nothing here reads. Decoding a run's instructions was most of a new run's cost
  // (~900 Ir an instruction in full mode). Checked: both modes agree on those fields at every
  // offset of libc and pt-decode's code and of 4 MB of random bytes (77 M decodes).
  ZydisDecoderEnableMode(zydis, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
  zydis_ = zydis;
  trace_begin_ = config.begin;
  trace_end_ = config.end;
  skd022_ = config.errata.skd022 != 0;
  skl014_ = config.errata.skl014 != 0 && config.addr_filter.config.addr_cfg != 0;
  Reset();
}

QueryWalker::~QueryWalker() {
  if (query_ != nullptr) pt_qry_free_decoder(query_);
  delete static_cast<ZydisDecoder*>(zydis_);
}

void QueryWalker::Reset() {
  ip_ = 0;
  status_ = 0;
  enabled_ = process_event_ = false;
  mode_ = ptem_unknown;
  std::memset(&event_, 0, sizeof event_);
  return_top_ = return_bottom_ = 0;
  time_offset_ = kNoTimeOffset;
  tnt_left_ = 0;
  tick_quiet_ = false;
}

int QueryWalker::SyncForward() {
  Reset();
  return Start(packets_ ? packets_->SyncForward(&ip_) : pt_qry_sync_forward(query_, &ip_));
}

int QueryWalker::SyncSet(uint64_t offset) {
  Reset();
  return Start(packets_ ? packets_->SyncSet(&ip_, offset) : pt_qry_sync_set(query_, &ip_, offset));
}

int QueryWalker::Start(int status) {
  if (status < 0) return status;
  status_ = status;
  if ((status & pts_ip_suppressed) == 0) enabled_ = true;
  return ProceedTrailingEvent();
}

int QueryWalker::Time(uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) const {
  return TimeInline(tsc, lost_mtc, lost_cyc);
}
int QueryWalker::GetOffset(uint64_t* offset) const {
  return packets_ ? packets_->GetOffset(offset) : pt_qry_get_offset(query_, offset);
}
int QueryWalker::GetSyncOffset(uint64_t* offset) const {
  return packets_ ? packets_->GetSyncOffset(offset) : pt_qry_get_sync_offset(query_, offset);
}

int QueryWalker::Next(pt_block* block) { return NextInline(block); }

int QueryWalker::FetchEvent() {
  if (process_event_) return 1;
  if ((status_ & pts_event_pending) == 0) return 0;
  time_offset_ = kNoTimeOffset;  // (pt_qry_event sets the time without moving on, see Tick)
  tnt_left_ = 0;
  tick_quiet_ = false;
  const int status =
      packets_ ? packets_->Event(&event_) : pt_qry_event(query_, &event_, sizeof event_);
  if (status < 0) return status;
  process_event_ = true;
  status_ = status;
  return 1;
}



const QueryWalker::Run& QueryWalker::RunAtSlow(uint64_t ip) {
  if (ip - last_section_begin_ >= last_section_end_ - last_section_begin_) {
    int isid = 0;
    uint64_t begin = 0, end = 0;
    if (!code_.Locate(ip, &isid, &begin, &end) || isid <= 0) {
      // Callback code (JIT) can change from one moment to the next: its runs are not cached,
      // its instructions are, per version of the code (CachedInsn).
      static thread_local Run uncached;
      uncached = DecodeRun(ip, /*cached=*/true);
      uncached.slow = true;
      return uncached;
    }
    last_section_begin_ = begin;
    last_section_end_ = end;
    last_isid_ = isid;
  }
  if (const Run* run = cache_->runs.Find(ip, last_isid_)) return *run;
  return cache_->runs.Insert(ip, last_isid_, DecodeRun(ip));
}

QueryWalker::Run QueryWalker::DecodeRun(uint64_t ip, bool cached) {
  Run run;
  Insn insn;
  uint64_t section_end = 0;
  // The section's bytes in place, when the code has them: the run lies in the section holding
  // its first instruction (it ends at the section's end: below), so one look-up serves it all,
  // with the isid and section end Read would answer for each instruction.
  int bytes_isid = 0;
  uint64_t bytes_end = 0;
  const uint8_t* bytes = cached ? nullptr : code_.Bytes(ip, &bytes_isid, &bytes_end);
  for (uint64_t at = ip;;) {
    const int status =
        cached              ? CachedInsn(at, &insn)
        : bytes != nullptr ? DecodeBytes(at, bytes + (at - ip),
                                         std::min<uint64_t>(ZYDIS_MAX_INSTRUCTION_LENGTH,
                                                            bytes_end - at),
                                         bytes_isid, bytes_end, &insn)
                           : DecodeInsn(at, &insn);
    if (status != 0) {
      run.slow = true;
      run.unsupported = status == kUnsupported;
      return run;
    }
    if (run.ninsn == 0) {
      run.isid = insn.isid;
      section_end = insn.section_end;
    }
    ++run.ninsn;
    run.end_ip = at;
    run.size = insn.size;
    run.iclass = static_cast<uint8_t>(insn.iclass);
    run.direct = insn.direct;
    run.target = insn.target;
    if (insn.iclass != ptic_other || run.ninsn >= QueryWalker::kMaxRunInsns) {
      if (insn.iclass == ptic_call && !cached) run.call_size = CallSize(at);
      // Too long for one block (below pt_block::ninsn's limit): refused, as a slow run, so that
      // the block step tests one flag for both.
      if (run.ninsn >= QueryWalker::kMaxRunInsns) run.slow = run.unsupported = true;
      return run;
    }
    at += insn.size;
    if (at >= section_end) {  // libipt ends the block there (see ProceedNoEventSlow)
      run.slow = true;
      return run;
    }
  }
}

uint8_t QueryWalker::CallSize(uint64_t ip) {
  // The bytes FlowDecoder::ClassifyLast would read (its section's, or fewer: then ClassifyBranch
  // answers the same or 0, never another length).
  uint8_t bytes[15];
  int isid = 0;
  uint64_t section_end = 0;
  const int read = code_.Read(ip, bytes, sizeof bytes, &isid, &section_end);
  return read <= 0 ? 0 : ClassifyBranch(bytes, static_cast<size_t>(read)).size;
}

int QueryWalker::DecodeInsn(uint64_t ip, Insn* insn) {
  uint8_t bytes[ZYDIS_MAX_INSTRUCTION_LENGTH];
  int isid = 0;
  uint64_t section_end = 0;
  const int read = code_.Read(ip, bytes, sizeof bytes, &isid, &section_end);
  if (read <= 0) return -pte_nomap;
  return DecodeBytes(ip, bytes, static_cast<size_t>(read), isid, section_end, insn);
}

int QueryWalker::DecodeBytes(uint64_t ip, const uint8_t* bytes, size_t size, int isid,
                             uint64_t section_end, Insn* insn) {
  ZydisDecodedInstruction decoded;
  if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(static_cast<ZydisDecoder*>(zydis_), nullptr,
                                                bytes, static_cast<ZyanUSize>(size), &decoded))) {
    // Zydis validates more than libipt's length decoder, which accepts some encodings Zydis
    // rejects (met in damaged trace that jumps into the middle of instructions), and an
    // instruction cut off at the section's end is a truncated one: neither is modelled.
    return kUnsupported;
  }
  insn->ip = ip;
  insn->size = decoded.length;
  insn->iclass = ClassOf(decoded, &insn->direct);
  if (insn->iclass == ptic_error) return kUnsupported;
  insn->target = insn->direct ? ip + decoded.length + Displacement(decoded) : 0;
  insn->isid = isid;
  insn->section_end = section_end;
  return 0;
}

int QueryWalker::CachedInsn(uint64_t ip, Insn* insn) {
  int isid = 0;
  uint64_t begin = 0, end = 0;
  // In the section of the last run (nearly always: stepping to an event's ip), no search.
  const bool located = ip - last_section_begin_ < last_section_end_ - last_section_begin_
                           ? (isid = last_isid_, true)
                           : code_.Locate(ip, &isid, &begin, &end);
  if (located && isid > 0) {
    if (const Insn* known = cache_->insns.Find(WalkerCache::Key{ip, isid})) {
      *insn = *known;
      return 0;
    }
    const int status = DecodeInsn(ip, insn);
    if (status == 0) *cache_->insns.TryEmplace(WalkerCache::Key{ip, isid}).first = *insn;
    return status;
  }
  // Callback code: by its version, when it has one. The bytes of one version are fixed, so the
  // decoded instruction is too.
  const uint64_t version = code_.CallbackVersion(ip);
  if (version == 0) return DecodeInsn(ip, insn);
  if (const Insn* known = cache_->callback_insns.Find({ip, version})) {
    *insn = *known;
    return 0;
  }
  const int status = DecodeInsn(ip, insn);
  if (status == 0) *cache_->callback_insns.TryEmplace({ip, version}).first = *insn;
  return status;
}




int QueryWalker::ProceedNoEventSlow(pt_block* block) {
  // As libipt's pt_blk_proceed_no_event: a block that starts in a section is walked through that
  // section's block cache (pt_blk_proceed_no_event_cached, or _fill_cache when cold), which ends
  // the block where the flow leaves the section, before looking at the next address: a walk that
  // runs off the section's end into unmapped memory ends its block there, and the next block
  // fails at that address with no instructions. Code outside any section (the read callback's)
  // is walked instruction by instruction (pt_blk_proceed_no_event_uncached), which fails with the
  // instructions still in the block, as the walk to an event's ip does (ProceedToIp).
  // Not modelled: libipt's block cache is kept per section and outlives an image, and a cache
  // entry that reaches past the section's current extent (a later mapping cut it) sends libipt
  // down the uncached walk instead.
  const uint64_t begin = last_section_begin_, end = last_section_end_;  // RunAt's, for ip_
  const bool in_section = begin <= ip_ && ip_ < end;
  Insn insn;
  for (;;) {
    const int added = ProceedOneInsn(block, &insn);
    if (added != 1) return added;  // 0, an error, or kUnsupported (positive: not an instruction)
    uint64_t next = 0;
    const int status = NextIpWithoutTrace(insn, &next);
    if (status == -pte_bad_query) return ProceedWithTrace(insn);
    if (status < 0) return status;
    ip_ = next;
    if (insn.iclass == ptic_call || insn.iclass == ptic_jump) return 0;
    if (in_section && (next < begin || next >= end)) return 0;  // left it: the block ends
  }
}

int QueryWalker::ProceedOneInsn(pt_block* block, Insn* insn) {
  if (static_cast<uint16_t>(block->ninsn + 1) == 0) return 0;
  const int status = CachedInsn(ip_, insn);
  if (status != 0) return status < 0 ? status : kUnsupported;
  if (insn->isid != block->isid) {
    if (block->ninsn != 0) return 0;
    block->isid = insn->isid;
  }
  if (insn->iclass == ptic_call && !(insn->direct && insn->target == insn->ip + insn->size)) {
    PushReturn(insn->ip + insn->size);
  }
  block->iclass = insn->iclass;
  block->end_ip = insn->ip;
  ++block->ninsn;
  return 1;
}

int QueryWalker::NextIpWithoutTrace(const Insn& insn, uint64_t* ip) {
  if (insn.iclass == ptic_other || insn.iclass == ptic_ptwrite) {
    *ip = insn.ip + insn.size;
    return 0;
  }
  if ((insn.iclass == ptic_call || insn.iclass == ptic_jump) && insn.direct) {
    *ip = insn.target;
    return 0;
  }
  return -pte_bad_query;
}

int QueryWalker::ProceedToIp(pt_block* block, Insn* insn, uint64_t ip) {
  return ProceedTo(block, insn, ip, /*reach_ip=*/true);
}

int QueryWalker::ProceedToTraceNeed(pt_block* block, Insn* insn) {
  return ProceedTo(block, insn, kNowhere, /*reach_ip=*/false);
}

int QueryWalker::ProceedTo(pt_block* block, Insn* insn, uint64_t ip, bool reach_ip) {
  if (block->ninsn == 0 && (!reach_ip || ip_ != ip)) {
    // The walk from a block's start goes through one run: its plain instructions, then its last
    // one, which either needs trace (the walk stops there) or is a direct call or jump (it goes
    // on to the target and stops). When `ip` is none of the run's addresses, the run is taken in
    // one step, as ProceedNoEvent takes it, instead of one instruction look-up each: those
    // look-ups (CachedInsn) probe a table of every instruction ever stepped, nearly always a
    // cache miss, and were ~3-5 % of pt-decode's time on pt-synth captures (a disable at each
    // syscall and untraced library call steps to it), for ~0.1 % of its instructions.
    const Run& run = RunAt(ip_);
    if (!run.slow && run.end_ip < last_section_end_ &&
        run.iclass != ptic_other && run.iclass != ptic_ptwrite &&
        (!reach_ip || ip - ip_ > run.end_ip - ip_)) {
      return ProceedRunToIp(block, insn, ip, reach_ip, run);
    }
  }
  for (;;) {
    if (reach_ip && ip_ == ip) return 1;
    const int added = ProceedOneInsn(block, insn);
    // kUnsupported is positive: taken for "one more instruction", the walk went on from the
    // previous instruction's fall-through, the same address, for ever (issue 24, fuzz timeout).
    if (added != 1) return added;
    uint64_t next = 0;
    const int status = NextIpWithoutTrace(*insn, &next);
    if (status < 0) return status;
    ip_ = next;
    if (insn->iclass == ptic_call || insn->iclass == ptic_jump) {
      return reach_ip && ip_ == ip ? 1 : 0;
    }
  }
}

int QueryWalker::ProceedRunToIp(pt_block* block, Insn* insn, uint64_t ip, bool reach_ip,
                                const Run& run) {
  // What ProceedToIp's loop does instruction by instruction: each plain instruction joins the
  // block (all in the run's section, so the block's isid is the run's); the last one too, with
  // its return address pushed if it is a call that returns.
  insn->ip = run.end_ip;
  insn->size = run.size;
  insn->iclass = static_cast<pt_insn_class>(run.iclass);
  insn->direct = run.direct;
  insn->target = run.target;
  insn->isid = run.isid;
  insn->section_end = last_section_end_;  // (RunAt's section: the run ends before its end)
  block->isid = run.isid;
  block->ninsn = run.ninsn;
  block->end_ip = run.end_ip;
  block->iclass = insn->iclass;
  const uint64_t next = run.end_ip + run.size;
  if (insn->iclass == ptic_call && !(insn->direct && insn->target == next)) PushReturn(next);
  ip_ = run.end_ip;
  uint64_t after = 0;
  const int status = NextIpWithoutTrace(*insn, &after);
  if (status < 0) return status;  // (-pte_bad_query: the last instruction needs trace)
  ip_ = after;                    // a direct call or jump (runs end at the first branch)
  return reach_ip && ip_ == ip ? 1 : 0;
}

int QueryWalker::ProceedWithTrace(const Insn& insn) {
  int status = 0;
  switch (insn.iclass) {
    case ptic_cond_jump: {
      int taken = 0;
      status = CondBranch(&taken);
      if (status < 0) return status;
      ip_ = taken ? insn.target : insn.ip + insn.size;
      break;
    }
    case ptic_return: {
      int taken = 0;
      status = CondBranch(&taken);
      if (status >= 0) {
        if (!taken) return -pte_bad_retcomp;
        const int popped = PopReturn(&ip_);
        if (popped < 0) return popped;
        break;
      }
      if (status != -pte_bad_query) return status;
      status = IndirectBranch(&ip_);
      if (status < 0) return status;
      break;
    }
    case ptic_call: case ptic_jump: case ptic_far_call: case ptic_far_return: case ptic_far_jump:
      status = IndirectBranch(&ip_);
      if (status < 0) return status;
      break;
    default:
      return -pte_internal;
  }
  status_ = status;
  return (status & pts_ip_suppressed) != 0 ? -pte_noip : 0;
}


int QueryWalker::CondBranchFill(int* taken) {
  uint64_t before = 0;
  unsigned bits = 0, size = 0;
  if (pt_qry_get_offset(query_, &before) >= 0) bits = TntBitsAt(before, &size);
  const int status = pt_qry_cond_branch(query_, taken);
  if (status < 0) return status;
  uint64_t offset = 0;
  const bool offset_ok = pt_qry_get_offset(query_, &offset) >= 0;
  // Moved past the TNT packet: this call loaded it and took its first bit.
  if (offset_ok && bits != 0 && offset >= before + size) {
    tnt_left_ = bits - 1;
    tnt_offset_ = offset;
  }
  const int tick = Tick(ip_, offset_ok, offset);
  return tick < 0 ? tick : status;
}

unsigned QueryWalker::TntBitsAt(uint64_t offset, unsigned* size) const {
  // TNT-8: one byte, bit 0 clear, the payload above it ending in a stop bit (bit 1 alone, 0x02,
  // is the extended opcode's byte, 0x00 is PAD). TNT-64: 02 a3 and 6 payload bytes with a stop
  // bit. The oldest branch is the bit below the stop bit.
  if (offset >= static_cast<uint64_t>(trace_end_ - trace_begin_)) return 0;
  const uint8_t* at = trace_begin_ + offset;
  const size_t left = static_cast<size_t>(trace_end_ - at);
  uint64_t payload = 0;
  unsigned bits = 0;
  if ((at[0] & 1) == 0 && at[0] != 0x00 && at[0] != 0x02) {
    payload = at[0] >> 1;
    bits = 0;
    *size = 1;
  } else if (at[0] == 0x02 && left >= 8 && at[1] == 0xa3) {
    for (unsigned i = 0; i < 6; ++i) payload |= uint64_t{at[2 + i]} << (8 * i);
    *size = 8;
  } else {
    return 0;
  }
  if (payload == 0) return 0;
  bits = 63 - static_cast<unsigned>(__builtin_clzll(payload));  // below the stop bit
  return bits;
}

int QueryWalker::IndirectBranch(uint64_t* ip) {
  tnt_left_ = 0;  // (it may decode packets)
  tick_quiet_ = false;
  const uint64_t at = ip_;
  const int status =
      packets_ ? packets_->IndirectBranch(ip) : pt_qry_indirect_branch(query_, ip);
  if (status < 0) return status;
  const int tick = Tick(at);
  return tick < 0 ? tick : status;
}

int QueryWalker::TickSlow(uint64_t ip) {
  tick_quiet_ = false;  // (the next Tick's test sets it, once this one's answer is recorded)
  uint64_t offset = 0;
  if (GetOffset(&offset) < 0) offset = kNoTimeOffset;
  if (offset != time_offset_ || offset == kNoTimeOffset) {
    time_tsc_ = 0;
    time_lost_mtc_ = time_lost_cyc_ = 0;
    time_status_ = TimeInline(&time_tsc_, &time_lost_mtc_, &time_lost_cyc_);
    time_offset_ = offset;
  }
  const int status = time_status_;
  const uint64_t tsc = time_tsc_;
  const uint32_t lost_mtc = time_lost_mtc_, lost_cyc = time_lost_cyc_;
  if (status < 0 && status != -pte_no_time) return status;
  if (tsc == event_.tsc) return 0;
  std::memset(&event_, 0, sizeof event_);
  event_.type = ptev_tick;
  event_.variant.tick.ip = ip;
  event_.has_tsc = status != -pte_no_time ? 1 : 0;
  event_.tsc = tsc;
  event_.lost_mtc = lost_mtc;
  event_.lost_cyc = lost_cyc;
  process_event_ = true;
  return 1;
}

int QueryWalker::ProceedEvent(pt_block* block) {
  Insn insn;
  int status = 0;
  switch (event_.type) {
    case ptev_enabled: case ptev_overflow: case ptev_stop: case ptev_pwre: case ptev_pwrx:
    case ptev_tick: case ptev_cbr: case ptev_mnt:
      break;
    case ptev_disabled:
      if (event_.ip_suppressed && skl014_) return kUnsupported;
      // Without an ip: up to the next instruction that needs trace (or that writes CR3, which
      // user code cannot), as libipt's pt_blk_proceed_to_insn does.
      status = event_.ip_suppressed ? ProceedToTraceNeed(block, &insn)
                                    : ProceedToIp(block, &insn, event_.variant.disabled.ip);
      if (status == kUnsupported) return status;
      if (status <= 0) {
        if (status != -pte_bad_query) return status;
        // The disable binds to the branch that needed trace: tracing resumes after a call.
        ip_ = insn.iclass == ptic_call || insn.iclass == ptic_far_call ? insn.ip + insn.size : 0;
      }
      break;
    case ptev_async_disabled:
      if (skd022_) return kUnsupported;
      status = ProceedToIp(block, &insn, event_.variant.async_disabled.at);
      if (status <= 0 || status == kUnsupported) return status;
      break;
    case ptev_async_branch:
      status = ProceedToIp(block, &insn, event_.variant.async_branch.from);
      if (status <= 0 || status == kUnsupported) return status;
      break;
    case ptev_paging: case ptev_vmcs: case ptev_ptwrite:
      if (enabled_) return kUnsupported;
      break;
    case ptev_exec_mode:
      if (event_.ip_suppressed) break;
      status = ProceedToIp(block, &insn, event_.variant.exec_mode.ip);
      if (status == -pte_bad_query) status = ProceedWithTrace(insn);
      if (status < 0 || status == kUnsupported) return status;
      if (ip_ != event_.variant.exec_mode.ip) return 0;
      break;
    case ptev_exstop:
      if (!enabled_ || event_.ip_suppressed) break;
      status = ProceedToIp(block, &insn, event_.variant.exstop.ip);
      if (status <= 0 || status == kUnsupported) return status;
      break;
    case ptev_mwait:
      if (!enabled_ || event_.ip_suppressed) break;
      status = ProceedToIp(block, &insn, event_.variant.mwait.ip);
      if (status <= 0 || status == kUnsupported) return status;
      break;
    default:  // TSX, asynchronous paging and VMCS, and anything newer
      return kUnsupported;
  }
  return Status(pts_event_pending);
}

int QueryWalker::ProceedTrailingEventSlow() {
  const int fetched = FetchEvent();
  if (fetched <= 0) return fetched < 0 ? fetched : Status(0);
  switch (event_.type) {
    case ptev_disabled:
      break;  // binds when the next block proceeds to it
    case ptev_enabled: case ptev_overflow: case ptev_stop: case ptev_pwre: case ptev_pwrx:
    case ptev_tick: case ptev_cbr: case ptev_mnt:
      return Status(pts_event_pending);
    case ptev_async_disabled:
      if (ip_ != event_.variant.async_disabled.at) break;
      if (skd022_) return kUnsupported;
      return Status(pts_event_pending);
    case ptev_async_branch:
      if (ip_ != event_.variant.async_branch.from) break;
      return Status(pts_event_pending);
    case ptev_paging: case ptev_vmcs: case ptev_ptwrite:
      if (!enabled_) return Status(pts_event_pending);
      return kUnsupported;
    case ptev_exec_mode:
      if (!event_.ip_suppressed && ip_ != event_.variant.exec_mode.ip) break;
      return Status(pts_event_pending);
    case ptev_exstop:
      if (!event_.ip_suppressed && enabled_ && ip_ != event_.variant.exstop.ip) break;
      return Status(pts_event_pending);
    case ptev_mwait:
      if (!event_.ip_suppressed && enabled_ && ip_ != event_.variant.mwait.ip) break;
      return Status(pts_event_pending);
    default:
      return kUnsupported;
  }
  return Status(0);
}

int QueryWalker::Event(pt_event* event) {
  if (!process_event_) return -pte_bad_query;
  pt_event& ev = event_;
  switch (ev.type) {
    case ptev_enabled:
      if (ev.variant.enabled.ip == ip_) ev.variant.enabled.resumed = 1;
      if (ev.status_update || enabled_) return -pte_bad_context;
      if (ev.ip_suppressed) return -pte_noip;
      ip_ = ev.variant.enabled.ip;
      enabled_ = true;
      break;
    case ptev_async_disabled:
      if (ip_ != ev.variant.async_disabled.at) return -pte_bad_query;
      [[fallthrough]];
    case ptev_disabled:
      if (ev.status_update || !enabled_) return -pte_bad_context;
      enabled_ = false;  // ip_ stays: where tracing resumes if it resumes there
      break;
    case ptev_async_branch:
      if (ip_ != ev.variant.async_branch.from) return -pte_bad_query;
      if (ev.status_update || !enabled_) return -pte_bad_context;
      ip_ = ev.variant.async_branch.to;
      break;
    case ptev_paging: case ptev_vmcs:
      break;  // (address spaces come from the sideband, not from CR3)
    case ptev_overflow:
      if (ev.status_update) return -pte_bad_context;
      enabled_ = !ev.ip_suppressed;
      ip_ = ev.ip_suppressed ? 0 : ev.variant.overflow.ip;
      break;
    case ptev_exec_mode:
      if (!ev.ip_suppressed && ip_ != ev.variant.exec_mode.ip) return -pte_bad_query;
      if (ev.status_update && enabled_ && mode_ != ptem_unknown &&
          mode_ != ev.variant.exec_mode.mode) {
        return -pte_bad_status_update;
      }
      mode_ = ev.variant.exec_mode.mode;
      if (mode_ != ptem_64bit) return kUnsupported;  // only 64-bit code is decoded here
      break;
    case ptev_stop:
      if (ev.status_update || enabled_) return -pte_bad_context;
      break;
    case ptev_exstop:
      if (!ev.ip_suppressed && enabled_ && ip_ != ev.variant.exstop.ip) return -pte_bad_query;
      break;
    case ptev_mwait:
      if (!ev.ip_suppressed && enabled_ && ip_ != ev.variant.mwait.ip) return -pte_bad_query;
      break;
    case ptev_pwre: case ptev_pwrx: case ptev_ptwrite: case ptev_tick: case ptev_cbr:
    case ptev_mnt:
      break;
    default:
      return kUnsupported;
  }
  process_event_ = false;
  *event = ev;
  return ProceedTrailingEvent();
}

}  // namespace ptscope::decode
