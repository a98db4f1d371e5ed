// QueryWalker: libipt's block-decoder interface (sync, next block, event, time) over libipt's query
// decoder, with our own instruction stepping.
//
// libipt's block decoder spends about three quarters of its time walking instructions (its
// per-section block cache, image look-ups, one pt_blk_next call per block); the packets themselves
// are a quarter. The walker keeps libipt's query decoder for the packets (pt_qry_*: TNT, TIP,
// events, time), or our own PacketQuery with the same answers (flow/packet_query.h: a TNT bit
// without a call; what it does not model, it refuses: packets_refused()), and replaces the walk
// by a table of runs: from an address, how many instructions up to the next branch, which branch,
// and its direct target. A run is decoded once per address (Zydis) and then costs one look-up.
//
// It reproduces the block decoder's output in the configuration pt-decode uses (end_on_call,
// end_on_jump, enable_tick_events): the same blocks (ip, end_ip, ninsn, iclass, isid) and the same
// events in the same order, with the same status flags. What it does not model, it refuses:
// Next/Event return kUnsupported (a positive code outside libipt's) and the caller decodes that
// stretch with libipt instead. Not modelled: the block-level workarounds of errata SKD022 and
// SKL014 (the latter with address filters only), TSX events, paging/VMCS/PTWRITE events while
// tracing, execution modes other than 64-bit, instructions cut by a section's end, and encodings
// Zydis rejects (libipt's length decoder is more lenient, which matters in damaged trace).
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "flat_map.h"
#include "flow/packet_query.h"
#include "flow/run_table.h"

namespace ptscope::decode {

// Where the walker reads code. Locate names the section holding `ip` (libipt's isid, as in
// pt_block::isid) and its addresses [begin, end), or returns false when no section does (code
// served by an image's read callback, such as JIT code, or nothing). Read copies up to `size`
// bytes at `ip` and returns how many (<= 0: nothing mapped there), with the same isid (0 for
// callback code) and section end.
class WalkerCode {
 public:
  virtual ~WalkerCode() = default;
  virtual bool Locate(uint64_t ip, int* isid, uint64_t* begin, uint64_t* end) = 0;
  virtual int Read(uint64_t ip, uint8_t* buffer, size_t size, int* isid, uint64_t* section_end) = 0;
  // The bytes Read would copy at `ip`, in place, from `ip` up to `*section_end` (with Read's isid
  // and section end), or nullptr when Read must copy them (code read through libipt's cache or a
  // callback). A run's instructions then cost one look-up for the run instead of one each.
  virtual const uint8_t* Bytes(uint64_t ip, int* isid, uint64_t* section_end) { return nullptr; }
  // For code no section holds (Locate false): an id of the bytes Read returns at `ip` now, such
  // as a JIT code load's (equal ids, equal bytes up to the same end), or 0 when there is none
  // (then that code is decoded again on every visit).
  virtual uint64_t CallbackVersion(uint64_t ip) { return 0; }
};

// An instruction as the walker needs it.
struct WalkerInsn {
  uint64_t ip = 0;
  uint8_t size = 0;
  pt_insn_class iclass = ptic_error;
  bool direct = false;
  uint64_t target = 0;
  int isid = 0;
  uint64_t section_end = 0;
};
// Decoded code by (section, address): code in a section never changes, so a worker's walkers
// share one cache across decode units and image epochs. Callback code (isid 0) is cached by
// (version, address) instead (WalkerCode::CallbackVersion): a JIT function is decoded once per
// load, and a reload or move to the same address, with other bytes, is another version.
struct WalkerCache {
  struct Key {
    uint64_t ip;
    int isid;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    uint64_t operator()(const Key& key) const {
      return (key.ip ^ (static_cast<uint64_t>(key.isid) << 48)) * 0x9E3779B97F4A7C15ull;
    }
  };
  RunTable runs;
  FlatMap<Key, WalkerInsn, KeyHash> insns;  // stepped one by one (to an event's ip)
  struct CallbackKey {
    uint64_t ip;
    uint64_t version;
    bool operator==(const CallbackKey&) const = default;
  };
  struct CallbackKeyHash {
    uint64_t operator()(const CallbackKey& key) const {
      return (key.ip ^ (key.version * 0xC2B2AE3D27D4EB4Full)) * 0x9E3779B97F4A7C15ull;
    }
  };
  FlatMap<CallbackKey, WalkerInsn, CallbackKeyHash> callback_insns;
};

class QueryWalker {
 public:
  // Returned by Next and Event for input the walker does not model (see the file comment).
  static constexpr int kUnsupported = 0x10000;
  // The longest run taken in one step (below pt_block::ninsn's limit; longer: unsupported).
  static constexpr uint16_t kMaxRunInsns = 0xff00;

  // `config` as for pt_blk_alloc_decoder; its block flags are ignored (the walker always behaves
  // as with end_on_call, end_on_jump and enable_tick_events).
  // `own_packets`: our PacketQuery reads the packets instead of libipt's query decoder.
  QueryWalker(const pt_config& config, WalkerCode& code, WalkerCache* cache = nullptr,
              bool own_packets = false);
  ~QueryWalker();
  QueryWalker(const QueryWalker&) = delete;
  QueryWalker& operator=(const QueryWalker&) = delete;

  bool ok() const { return query_ != nullptr || packets_ != nullptr; }
  // PacketQuery met packets it does not model (sticky): whatever the walker answered since is
  // void, and the caller decodes the same trace again with libipt's query decoder.
  bool packets_refused() const { return packets_ != nullptr && packets_->refused(); }
  // Sets `*flag` when packets_refused() turns true (now, if it is): PacketQuery::NotifyRefusal.
  void NotifyPacketsRefused(bool* flag) {
    if (packets_ != nullptr) packets_->NotifyRefusal(flag);
  }
  // As pt_blk_sync_forward, pt_blk_sync_set, pt_blk_next, pt_blk_event, pt_blk_time,
  // pt_blk_get_offset, pt_blk_get_sync_offset.
  int SyncForward();
  int SyncSet(uint64_t offset);
  int Next(pt_block* block);
  // Next, inlined into the caller (include flow/query_walker_step.h): the block loop's form.
  // `at`: RunAt(ip_)'s answer when the caller has it from NextQuiet (QuietBlocks::next), which
  // saves its second probe of the run table; else nullptr.
  int NextInline(pt_block* block, const WalkerRun* at = nullptr);
  int Event(pt_event* event);
  // Where NextQuiet's blocks may lie: each block's first address in [start_begin, start_begin +
  // start_width), its first and last address in [begin, begin + width) (unsigned differences:
  // width ~0 from 0 holds every address but the last, an empty window none).
  struct QuietBounds {
    uint64_t start_begin = 0, start_width = ~uint64_t{0};
    uint64_t begin = 0, width = ~uint64_t{0};
  };
  // What NextQuiet took: `ninsn` instructions (0: no block), the last block's end_ip and isid;
  // `next`: the run it found at the address it stopped at but did not take (a call, a return, a
  // bit not cached...), which is what RunAt would answer there, for the NextInline that comes
  // next (valid until the walker does anything else), or nullptr.
  struct QuietBlocks {
    uint64_t ninsn = 0;
    uint64_t end_ip = 0;
    int isid = 0;
    const WalkerRun* next = nullptr;
  };
  // Takes the blocks NextInline would return next, without returning them, as long as each is
  // one cached run ending at a conditional branch whose bit PacketQuery has cached after a quiet
  // Tick (NextInline's answer for it: status 0, no event, no tick; its call size 0) inside
  // `bounds`, and the blocks taken have fewer than `budget` instructions in all. The walker is
  // left as NextInline would leave it after the same blocks. (The FlowDecoder's block loop walks
  // through the blocks that make no event this way: see FlowDecoder::TakeQuietBlocks.)
  QuietBlocks NextQuiet(const QuietBounds& bounds, uint64_t budget);
  // Event for a tick, inlined into the caller and without the pt_event: when the event in
  // process is a tick, takes it as Event does and returns true, with Event's answer in
  // `*status` and the tick's time in `*has_tsc` (pt_event::has_tsc) and `*tsc`; false, with
  // nothing done, for any other event. Most events are ticks, and the block loop needs only
  // their time (Event stays the interface compared with libipt's pt_blk_event).
  [[gnu::always_inline]] bool TakeTick(int* status, bool* has_tsc, uint64_t* tsc) {
    if (!process_event_ || event_.type != ptev_tick) return false;
    process_event_ = false;  // (Event's tick case: no check, no state)
    *has_tsc = event_.has_tsc != 0;
    *tsc = event_.tsc;
    *status = ProceedTrailingEvent();
    return true;
  }
  int Time(uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) const;
  int GetOffset(uint64_t* offset) const;
  int GetSyncOffset(uint64_t* offset) const;
  // The length of the call that ended the last block (WalkerRun::call_size), when the block was
  // one cached run; else 0 (not known here).
  uint8_t last_call_size() const { return last_call_size_; }
  // The code changed its epoch (another image): forget which section was looked up last. Both
  // bounds: the range checks are unsigned (ip - begin < end - begin), so [begin, 0) would hold
  // every address from begin up, with no look-up in the new image (and ProceedNoEventSlow would
  // take the run as outside any section, unlike libipt's pt_blk_proceed_no_event).
  void CodeChanged() { last_section_begin_ = last_section_end_ = 0; }

 private:
  using Run = WalkerRun;
  using Insn = WalkerInsn;

  // The run at `ip`: a cached run of the current section in one hash probe, inlined into the
  // block loop (the call and its register saves cost more than the probe); RunAtSlow otherwise.
  [[gnu::always_inline]] const Run& RunAt(uint64_t ip) {
    if (ip - last_section_begin_ < last_section_end_ - last_section_begin_) [[likely]] {
      if (const Run* run = cache_->runs.Find(ip, last_isid_)) return *run;
    }
    return RunAtSlow(ip);
  }
  const Run& RunAtSlow(uint64_t ip);
  // Decodes the run at `ip`, its instructions with DecodeInsn, or with CachedInsn when `cached`.
  Run DecodeRun(uint64_t ip, bool cached = false);
  int DecodeInsn(uint64_t ip, Insn* insn);
  // DecodeInsn on bytes at hand: `size` (1 to 15) bytes of code at `ip`, in section `isid`.
  int DecodeBytes(uint64_t ip, const uint8_t* bytes, size_t size, int isid, uint64_t section_end,
                  Insn* insn);
  uint8_t CallSize(uint64_t ip);  // WalkerRun::call_size of the call at `ip`
  int CachedInsn(uint64_t ip, Insn* insn);  // DecodeInsn, remembered when it succeeds
  void Reset();
  int Start(int status);
  int Status(int flags) const {
    if (!enabled_) flags |= pts_ip_suppressed;
    if ((status_ & pts_eos) != 0 && !process_event_) flags |= pts_eos;
    return flags;
  }
  // Whether an event is in process or libipt has one pending (FetchEvent has work to do).
  bool EventAhead() const { return process_event_ || (status_ & pts_event_pending) != 0; }
  int FetchEvent();
  int Proceed(pt_block* block, const Run* at);
  // ProceedNoEvent's answer for a block that ended at a conditional branch whose bit came from
  // PacketQuery's cache after a quiet Tick: Proceed's answer is 0, no trailing event to look for.
  static constexpr int kQuietBlock = 1;
  int ProceedNoEvent(pt_block* block, const Run* at);
  int ProceedNoEventSlow(pt_block* block);  // instruction by instruction
  int ProceedEvent(pt_block* block);
  // After a block: the event that binds to where it stopped, if any. Nearly every block has
  // none, which costs two tests here instead of a call.
  [[gnu::always_inline]] int ProceedTrailingEvent() {
    return EventAhead() ? ProceedTrailingEventSlow() : Status(0);
  }
  int ProceedTrailingEventSlow();
  // Adds the instruction at ip_ to `block` (0: it does not fit, or another section).
  int ProceedOneInsn(pt_block* block, Insn* insn);
  // Proceeds without trace until ip_ == ip (1), a block end (0) or an instruction that needs
  // trace (-pte_bad_query).
  int ProceedToIp(pt_block* block, Insn* insn, uint64_t ip);
  // The same with no ip to reach (a disable whose ip is suppressed): never 1, and the first
  // instruction is always decoded, as in libipt's pt_blk_proceed_to_insn. (An ip that stands
  // for "none" would be reached when the walk is at it: a fuzzed TIP.PGE to 0xff..ff then made
  // the walker skip the missing-code gap libipt reports there.)
  int ProceedToTraceNeed(pt_block* block, Insn* insn);
  int ProceedTo(pt_block* block, Insn* insn, uint64_t ip, bool reach_ip);
  // ProceedTo from a block's start when `ip` is none of the addresses of `run`, the run there.
  int ProceedRunToIp(pt_block* block, Insn* insn, uint64_t ip, bool reach_ip, const Run& run);
  // The next ip after `insn` without trace, or -pte_bad_query when it needs trace.
  int NextIpWithoutTrace(const Insn& insn, uint64_t* ip);
  // The next ip after `insn` from trace (TNT or TIP), with a tick event when time moved.
  int ProceedWithTrace(const Insn& insn);
  int CondBranch(int* taken);
  int IndirectBranch(uint64_t* ip);
  // After a TNT or TIP: a tick event when the time moved. Nearly always it did not, and the
  // trace offset says so (see time_offset_); TickSlow asks libipt otherwise.
  // `offset_ok`/`offset`: pt_qry_get_offset's answer now, when the caller knows it.
  [[gnu::always_inline]] int Tick(uint64_t ip, bool offset_ok, uint64_t offset) {
    tick_quiet_ = false;
    if (!enabled_) return -pte_internal;
    if (process_event_) return 0;  // the event in process has a time of its own
    if (offset_ok && offset == time_offset_ &&
        (time_status_ >= 0 || time_status_ == -pte_no_time) && time_tsc_ == event_.tsc) {
      tick_quiet_ = true;
      return 0;
    }
    return TickSlow(ip);
  }
  [[gnu::always_inline]] int Tick(uint64_t ip) {
    uint64_t offset = 0;
    const bool offset_ok = GetOffset(&offset) >= 0;
    return Tick(ip, offset_ok, offset);
  }
  // CondBranch when libipt's TNT cache may be empty: the call that may decode the next packet.
  int CondBranchFill(int* taken);
  // The number of TNT bits in the packet at `offset` of the trace, 0 when it holds no TNT
  // packet; `size`: the packet's length.
  unsigned TntBitsAt(uint64_t offset, unsigned* size) const;
  int TickSlow(uint64_t ip);
  // Time, inlined into TickSlow (a tick is about every other TNT packet).
  [[gnu::always_inline]] int TimeInline(uint64_t* tsc, uint32_t* lost_mtc,
                                        uint32_t* lost_cyc) const {
    if (PacketQuery* packets = packets_.get()) return packets->Time(tsc, lost_mtc, lost_cyc);
    return pt_qry_time(query_, tsc, lost_mtc, lost_cyc);
  }
  void PushReturn(uint64_t ip);
  int PopReturn(uint64_t* ip);

  WalkerCode& code_;
  pt_query_decoder* query_ = nullptr;               // libipt's packets, or
  std::unique_ptr<PacketQuery> packets_;             // ours
  uint64_t ip_ = 0;
  int status_ = 0;  // the last query status
  bool enabled_ = false;
  bool process_event_ = false;
  // Errata whose workarounds libipt applies at block level (not modelled: refused when met).
  bool skd022_ = false;
  bool skl014_ = false;  // (with address filtering only)
  pt_exec_mode mode_ = ptem_unknown;
  pt_event event_{};
  // pt_qry_time's last answer, and the trace offset it was given at (kNoTimeOffset: none). In
  // libipt 2.0.5 the time it reports (the query decoder's last_time) changes only in
  // pt_qry_cond_branch and pt_qry_indirect_branch after they decoded a packet, so at a new
  // offset, and in pt_qry_event and the syncs, after which the answer is dropped. At an
  // unchanged offset the answer still holds: most branches take their bit from a cached TNT
  // packet, and one offset look-up is cheaper than the time query it replaces.
  static constexpr uint64_t kNoTimeOffset = ~uint64_t{0};
  uint64_t time_offset_ = kNoTimeOffset;
  int time_status_ = 0;
  uint64_t time_tsc_ = 0;
  uint32_t time_lost_mtc_ = 0, time_lost_cyc_ = 0;
  // How many bits libipt's TNT cache holds for certain (a lower bound; 0: not known), and the
  // trace offset, which stays put while those are taken: pt_qry_cond_branch pops a cached bit
  // without decoding a packet (pt_tnt_cache_query), so neither the offset nor the time moves
  // and Tick needs no offset query. Set when a pt_qry_cond_branch moved the offset (it decoded
  // a packet, so the cache was empty and it loaded the TNT packet at the offset it started
  // from: libipt's read-ahead leaves the offset at a TNT, TIP or event packet); dropped by every
  // other query that can move the offset (indirect branch, event, sync).
  unsigned tnt_left_ = 0;
  uint64_t tnt_offset_ = 0;
  // The last Tick answered 0 from the test above (tracing enabled, no event in process, the
  // time at the offset known and already reported), and since then nothing changed what that
  // test reads: no event was fetched or processed (FetchEvent, TickSlow and Reset clear it;
  // process_event_ is true from FetchEvent or TickSlow until Event) and PacketQuery decoded no
  // packet (every query but a cached TNT bit clears it). Then a cached bit (PacketQuery) gets
  // Tick's answer without the offset: 0.
  bool tick_quiet_ = false;
  const uint8_t* trace_begin_ = nullptr;
  const uint8_t* trace_end_ = nullptr;
  // libipt's return stack: 64 entries in a ring of 65, the oldest overwritten.
  static constexpr unsigned kReturnSlots = 65;
  uint64_t returns_[kReturnSlots] = {};
  uint8_t return_top_ = 0, return_bottom_ = 0;
  WalkerCache own_cache_;
  WalkerCache* cache_ = &own_cache_;
  // The section of the last run looked up: [last_section_begin_, last_section_end_), isid.
  uint64_t last_section_begin_ = 0, last_section_end_ = 0;
  int last_isid_ = 0;
  void* zydis_ = nullptr;  // ZydisDecoder (kept out of this header)
  uint8_t last_call_size_ = 0;
};

}  // namespace ptscope::decode
