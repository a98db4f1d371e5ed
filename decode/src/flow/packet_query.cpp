// PacketQuery (see packet_query.h). Written from libipt 2.0.5's documented query-decoder behaviour
// (pt_query_decoder.c, pt_time.c, pt_event_queue.c, pt_last_ip.c, pt_tnt_cache.c, pt_sync.c as
// the specification); the structure follows it where the order of side effects decides an
// answer: what a failing query has already consumed, when an event shows as pending, which time
// an event and pt_qry_time see.
#include "flow/packet_query.h"

#include <bit>
#include <cstddef>
#include <cstring>

namespace ptscope::decode {
namespace {

constexpr unsigned kPsbSize = 16;  // 02 82, seven more times
constexpr unsigned kTmaSize = 7;
constexpr unsigned kTscSize = 8;
constexpr unsigned kCbrSize = 4;
constexpr unsigned kPipSize = 8;
constexpr unsigned kTnt64Size = 8;
constexpr unsigned kCycBits = 64;
static_assert(std::endian::native == std::endian::little);  // (Load8)

// The payload size of an IP packet by its IPBytes field (-1: reserved, a bad packet).
constexpr int8_t kIpSizes[8] = {0, 2, 4, 6, 6, -1, 8, -1};

uint64_t ReadLittle(const uint8_t* at, unsigned size) {
  uint64_t value = 0;
  for (unsigned i = 0; i < size; ++i) value |= uint64_t{at[i]} << (8 * i);
  return value;
}

// The 8 bytes at `at` as a little-endian number, one unaligned load (the caller checked that
// they lie in the trace): a packet of 8 bytes, its payload the bits above its opcode bytes.
uint64_t Load8(const uint8_t* at) {
  uint64_t value = 0;
  std::memcpy(&value, at, sizeof value);
  return value;
}

// The payload of a TNT packet to the bits and the index of the oldest one (0: no bits, a bad
// packet: the stop bit is the highest set bit, the oldest branch the bit below it).
uint64_t TntIndex(uint64_t payload, uint64_t* bits) {
  if (payload < 2) return 0;
  const unsigned stop = 63 - static_cast<unsigned>(__builtin_clzll(payload));
  *bits = payload & ~(uint64_t{1} << stop);
  return uint64_t{1} << (stop - 1);
}

bool IsPsbAt(const uint8_t* at, const uint8_t* end) {
  if (end - at < static_cast<std::ptrdiff_t>(kPsbSize)) return false;
  for (unsigned i = 0; i < kPsbSize; i += 2) {
    if (at[i] != 0x02 || at[i + 1] != 0x82) return false;
  }
  return true;
}

}  // namespace

PacketQuery::PacketQuery(const pt_config& config)
    : begin_(config.begin),
      end_(config.end),
      mtc_freq_(config.mtc_freq),
      nom_freq_(config.nom_freq),
      cpuid15_eax_(config.cpuid_0x15_eax),
      cpuid15_ebx_(config.cpuid_0x15_ebx),
      bdm70_(config.errata.bdm70 != 0),
      skd007_(config.errata.skd007 != 0),
      skl168_(config.errata.skl168 != 0),
      skz84_(config.errata.skz84 != 0),
      skd010_(config.errata.skd010 != 0),
      apl11_(config.errata.apl11 != 0),
      apl12_(config.errata.apl12 != 0) {
  // A decode callback for unknown packets means more than modelled here. The errata handled at
  // the packet level are BDM70, SKD007 and SKZ84 (DecodeTma); SKD010, APL11 and APL12 change
  // what an OVF binds to, and DecodeOvf refuses where their workarounds would apply.
  if (config.decode.callback != nullptr) refused_ = true;
  Reset();
}

void PacketQuery::Reset() {
  enabled_ = consume_packet_ = false;
  event_ = nullptr;
  last_ip_ = 0;
  have_ip_ = ip_suppressed_ = false;
  tnt_bits_ = tnt_index_ = 0;
  clock_ = Clock{};
  last_clock_ = Clock{};
  calibration_ = Calibration{};
  for (Queue& queue : queues_) queue.begin = queue.end = 0;
}

// ---- Fetching ------------------------------------------------------------------------------

const std::array<uint8_t, 256> PacketQuery::kOpcodeKinds = [] {
  std::array<uint8_t, 256> kinds{};
  for (unsigned opc = 0; opc < 256; ++opc) {
    Kind kind = Kind::kNone;  // (none of the rules: an unknown opcode)
    if (opc == 0x02) {
      kinds[opc] = kOpcodeExtended;
      continue;
    }
    if (opc == 0x00) kind = Kind::kPad;
    else if (opc == 0x99) kind = Kind::kMode;
    else if (opc == 0x19) kind = Kind::kTsc;
    else if (opc == 0x59) kind = Kind::kMtc;
    else if ((opc & 0x01) == 0) kind = Kind::kTnt8;
    else if ((opc & 0x03) == 0x03) kind = Kind::kCyc;
    else if ((opc & 0x1f) == 0x0d) kind = Kind::kTip;
    else if ((opc & 0x1f) == 0x1d) kind = Kind::kFup;
    else if ((opc & 0x1f) == 0x11) kind = Kind::kTipPge;
    else if ((opc & 0x1f) == 0x01) kind = Kind::kTipPgd;
    kinds[opc] = kind != Kind::kNone ? static_cast<uint8_t>(kind) : kOpcodeRefused;
  }
  return kinds;
}();

[[gnu::always_inline]] inline int PacketQuery::FetchAt(const uint8_t* pos, Kind* kind) const {
  *kind = Kind::kNone;
  if (pos == end_) return -pte_eos;
  const uint8_t entry = kOpcodeKinds[pos[0]];
  if (entry < kOpcodeExtended) [[likely]] {
    *kind = static_cast<Kind>(entry);
    return 0;
  }
  if (entry == kOpcodeRefused) return kRefused;
  if (pos + 1 == end_) return -pte_eos;
  switch (pos[1]) {
    case 0x82: *kind = Kind::kPsb; return 0;
    case 0xa3: *kind = Kind::kTnt64; return 0;
    case 0x23: *kind = Kind::kPsbend; return 0;
    case 0x03: *kind = Kind::kCbr; return 0;
    case 0x73: *kind = Kind::kTma; return 0;
    case 0x43: *kind = Kind::kPip; return 0;
    case 0xf3: *kind = Kind::kOvf; return 0;
    default: return kRefused;  // STOP, VMCS, MNT, power, PTW, unknown
  }
}

[[gnu::always_inline]] inline int PacketQuery::Fetch() {
  const int status = FetchAt(pos_, &next_);
  return status == kRefused ? Refuse() : status;
}

// ---- Synchronisation -------------------------------------------------------------------------

int PacketQuery::SyncForward(uint64_t* ip) {
  if (refused_) return kRefused;
  // As pt_qry_sync_forward: from the current position (past the PSB synchronised at), backed up
  // by up to 15 bytes to find a PSB a previous packet ran into; then the first 8-byte-aligned
  // word (by address) of PSB pattern, and the PSB that pattern belongs to, at or after `start`.
  const uint8_t* pos = pos_ != nullptr ? pos_ : begin_;
  if (pos == sync_) pos += kPsbSize;
  if (pos < begin_) return Refuse();
  const std::ptrdiff_t back = pos - begin_ < static_cast<std::ptrdiff_t>(kPsbSize)
                             ? pos - begin_
                             : static_cast<std::ptrdiff_t>(kPsbSize) - 1;
  pos -= back;
  if (pos > end_) return Refuse();
  const uint8_t* start = pos;
  const auto address = reinterpret_cast<uintptr_t>(pos);
  const uint8_t* word = pos + ((8 - address % 8) % 8);
  for (;; word += 8) {
    if (end_ - word < 8) return -pte_eos;
    uint64_t value;
    std::memcpy(&value, word, 8);
    if (value != 0x8202820282028202ull && value != 0x0282028202820282ull) continue;
    // The PSB: after the run of 02 82 pairs that includes this word, 16 bytes back.
    const uint8_t* at = word + 8;
    if (at == end_ || *at != 0x02) ++at;  // (libipt reads the byte at the end here)
    while (at + 1 < end_ && at[0] == 0x02 && at[1] == 0x82) at += 2;
    if (at - begin_ < static_cast<std::ptrdiff_t>(kPsbSize)) continue;
    at -= kPsbSize;
    if (!IsPsbAt(at, end_) || at < start) continue;
    return Start(at, ip);
  }
}

int PacketQuery::SyncSet(uint64_t* ip, uint64_t offset) {
  if (refused_) return kRefused;
  if (offset > static_cast<uint64_t>(end_ - begin_)) return -pte_eos;
  const uint8_t* pos = begin_ + offset;
  if (end_ - pos < 2) return -pte_eos;
  if (pos[0] != 0x02 || pos[1] != 0x82) return -pte_nosync;
  if (end_ - pos < static_cast<std::ptrdiff_t>(kPsbSize)) return -pte_eos;
  if (!IsPsbAt(pos, end_)) return Refuse();
  return Start(pos, ip);
}

int PacketQuery::Start(const uint8_t* pos, uint64_t* ip) {
  Reset();
  sync_ = pos_ = pos;
  int status = Fetch();
  if (status != 0) return status;
  if (next_ != Kind::kPsb) return -pte_nosync;
  status = DecodePsb();
  if (status < 0) return status;
  // The start address before reading ahead: an adjacent PSB+ could change the last ip.
  bool have_start = false;
  if (ip != nullptr) have_start = LastIp(ip) == 0;
  status = ReadAhead();
  if (status < 0) return status;
  int flags = StatusFlags();
  if (ip != nullptr && !have_start && LastIp(ip) < 0) flags |= pts_ip_suppressed;
  return flags;
}

// ---- The query loop ------------------------------------------------------------------------

[[gnu::always_inline]] inline bool PacketQuery::WillEvent() const {
  switch (next_) {
    case Kind::kTipPge: case Kind::kTipPgd: case Kind::kMode: case Kind::kCbr: case Kind::kPip:
      return true;
    case Kind::kPsbend: return Pending(kAtPsbend);
    case Kind::kTip: return Pending(kAtTip);
    case Kind::kOvf: return true;
    case Kind::kFup: return Pending(kAtFup);
    default: return false;
  }
}

bool PacketQuery::WillEos() const {
  if (next_ != Kind::kNone) return false;
  Kind kind;
  return FetchAt(pos_, &kind) == -pte_eos;
}

int PacketQuery::StatusFlags() const {
  // Events and the end show only once the cached TNT bits are used up: the user first walks to
  // where those bits lead.
  if (tnt_index_ != 0) return 0;
  int flags = 0;
  if (WillEvent()) flags |= pts_event_pending;
  if (WillEos()) flags |= pts_eos;
  return flags;
}

int PacketQuery::ReadAhead() {
  for (;;) {
    const int status = Fetch();
    if (status != 0) return status;
    int decoded = 0;
    // The timing packets between branches (CYC, MTC) without Decode's call and switch: these
    // are most of the packets read ahead. (Decode's treatment of an error, inlined.)
    if (next_ == Kind::kCyc) {
      decoded = DecodeCyc();
      if (decoded < 0 && decoded != -pte_eos) decoded = Refuse();
    } else if (next_ == Kind::kMtc) {
      decoded = DecodeMtc();
      if (decoded < 0 && decoded != -pte_eos) decoded = Refuse();
    } else {
      if (next_ == Kind::kTnt8 || next_ == Kind::kTnt64 || next_ == Kind::kTip) return 0;
      if (WillEvent()) return 0;
      decoded = Decode();
    }
    if (decoded != 0) {
      if (decoded == -pte_eos) {  // a status packet cut off at the end
        pos_ = end_;
        next_ = Kind::kNone;
      }
      return decoded;
    }
  }
}

int PacketQuery::CondBranchSlow(int* taken) {
  if (refused_) return kRefused;
  if (tnt_index_ == 0) {
    const int status = CacheTnt();
    if (status < 0) return status;
  }
  *taken = (tnt_bits_ & tnt_index_) != 0;
  tnt_index_ >>= 1;
  return StatusFlags();
}

int PacketQuery::CacheTnt() {
  for (;;) {
    // Nearly always the read-ahead stopped at the TNT packet: the loop's tests and Decode's
    // switch for it, short.
    if (next_ == Kind::kTnt8 || next_ == Kind::kTnt64) [[likely]] {
      event_ = nullptr;
      const int status = DecodeTnt();
      if (status != 0) return status < 0 && status != -pte_eos ? Refuse() : status;
      break;
    }
    if (next_ == Kind::kNone) {  // pt_qry_provoke_fetch_error
      const int status = Fetch();
      return status < 0 ? status : Refuse();
    }
    if (WillEvent() || next_ == Kind::kTip) return -pte_bad_query;
    event_ = nullptr;
    const Kind kind = next_;
    const int status = Decode();
    if (status != 0) return status;
    if (event_ != nullptr) return Refuse();  // (-pte_event_ignored)
    if (kind == Kind::kTnt8 || kind == Kind::kTnt64) break;
    const int ahead = ReadAhead();
    if (ahead != 0) return ahead;
  }
  last_clock_ = clock_;
  const int ahead = ReadAhead();
  if (ahead < 0 && ahead != -pte_eos) return ahead;
  return 0;
}

int PacketQuery::IndirectBranch(uint64_t* ip) {
  if (refused_) return kRefused;
  int flags = 0;
  for (;;) {
    if (next_ == Kind::kNone) {
      const int status = Fetch();
      return status < 0 ? status : Refuse();
    }
    if (WillEvent()) return -pte_bad_query;
    event_ = nullptr;
    const Kind kind = next_;
    // A TNT packet while bits are still cached: the user is out of step.
    if ((kind == Kind::kTnt8 || kind == Kind::kTnt64) && tnt_index_ != 0) return -pte_bad_query;
    const int status = Decode();
    if (status != 0) return status;
    if (event_ != nullptr) return Refuse();  // (-pte_event_ignored)
    if (kind == Kind::kTip) {
      uint64_t target = 0;
      if (LastIp(&target) < 0) flags |= pts_ip_suppressed;
      else *ip = target;
      break;
    }
    const int ahead = ReadAhead();
    if (ahead != 0) return ahead;
  }
  last_clock_ = clock_;
  const int ahead = ReadAhead();
  if (ahead < 0 && ahead != -pte_eos) return ahead;
  return flags | StatusFlags();
}

int PacketQuery::Event(pt_event* event) {
  if (refused_) return kRefused;
  if (tnt_index_ != 0) return -pte_bad_query;
  for (;;) {
    if (next_ == Kind::kNone) {
      const int status = Fetch();
      return status < 0 ? status : Refuse();
    }
    const bool branch = next_ == Kind::kTnt8 || next_ == Kind::kTnt64 || next_ == Kind::kTip;
    if (branch && !WillEvent()) return -pte_bad_query;
    event_ = nullptr;
    const int status = Decode();
    if (status != 0) return status;
    if (event_ != nullptr) {
      *event = *event_;
      break;
    }
    const int ahead = ReadAhead();
    if (ahead != 0) return ahead;
  }
  last_clock_ = clock_;
  const int ahead = ReadAhead();
  if (ahead < 0 && ahead != -pte_eos) return ahead;
  return StatusFlags();
}

// ---- Packets -------------------------------------------------------------------------------

int PacketQuery::Decode() {
  int status = 0;
  switch (next_) {
    case Kind::kPad: ++pos_; return 0;
    case Kind::kPsb: status = DecodePsb(); break;
    case Kind::kPsbend: status = DecodePsbend(); break;
    case Kind::kTnt8: case Kind::kTnt64: status = DecodeTnt(); break;
    case Kind::kTip: status = DecodeTip(); break;
    case Kind::kTipPge: status = DecodeTipPge(); break;
    case Kind::kTipPgd: status = DecodeTipPgd(); break;
    case Kind::kFup: status = DecodeFup(); break;
    case Kind::kMode: status = DecodeMode(false); break;
    case Kind::kPip: status = DecodePip(false); break;
    case Kind::kTsc: status = DecodeTsc(false); break;
    case Kind::kCbr: status = DecodeCbr(false); break;
    case Kind::kTma: status = DecodeTma(); break;
    case Kind::kMtc: status = DecodeMtc(); break;
    case Kind::kCyc: status = DecodeCyc(); break;
    case Kind::kOvf: status = DecodeOvf(); break;
    case Kind::kNone: return Refuse();
  }
  // The end of the trace inside a packet is libipt's too; anything else is damage.
  if (status < 0 && status != -pte_eos) return Refuse();
  return status;
}

int PacketQuery::DecodeHeader() {
  switch (next_) {
    case Kind::kPad: ++pos_; return 0;
    case Kind::kFup: return HeaderFup();
    case Kind::kMode: return DecodeMode(true);
    case Kind::kPip: return DecodePip(true);
    case Kind::kTsc: return DecodeTsc(true);
    case Kind::kCbr: return DecodeCbr(true);
    case Kind::kTma: return DecodeTma();
    case Kind::kMtc: return DecodeMtc();
    case Kind::kCyc: return DecodeCyc();
    default: return Refuse();  // not a PSB+ packet (-pte_bad_context)
  }
}

[[gnu::always_inline]] inline int PacketQuery::ReadIp(uint64_t* ip, int* ipc) const {
  *ipc = pos_[0] >> 5;
  const int size = kIpSizes[*ipc];
  if (size < 0) return kRefused;  // (-pte_bad_packet)
  const std::ptrdiff_t left = end_ - (pos_ + 1);
  if (left < size) return -pte_eos;
  if (left >= 8) {
    // One unaligned load, masked to the payload.
    const uint64_t value = Load8(pos_ + 1);
    *ip = size == 8 ? value : value & ((uint64_t{1} << (8 * size)) - 1);
  } else {
    *ip = ReadLittle(pos_ + 1, static_cast<unsigned>(size));
  }
  return size + 1;
}

int PacketQuery::DecodeIp() {
  uint64_t ip = 0;
  int ipc = 0;
  const int size = ReadIp(&ip, &ipc);
  if (size < 0) return size == kRefused ? Refuse() : size;
  switch (ipc) {
    case 0: ip_suppressed_ = true; return size;
    case 1: last_ip_ = (last_ip_ & ~0xffffull) | ip; break;
    case 2: last_ip_ = (last_ip_ & ~0xffffffffull) | ip; break;
    case 3: last_ip_ = static_cast<uint64_t>(static_cast<int64_t>(ip << 16) >> 16); break;
    case 4: last_ip_ = (last_ip_ & ~0xffffffffffffull) | ip; break;
    default: last_ip_ = ip; break;
  }
  have_ip_ = true;
  ip_suppressed_ = false;
  return size;
}

int PacketQuery::LastIp(uint64_t* ip) const {
  if (!have_ip_) {
    if (ip != nullptr) *ip = 0;
    return -pte_noip;
  }
  if (ip_suppressed_) {
    if (ip != nullptr) *ip = 0;
    return -pte_ip_suppressed;
  }
  if (ip != nullptr) *ip = last_ip_;
  return 0;
}

[[gnu::always_inline]] inline int PacketQuery::DecodeTnt() {
  uint64_t payload = 0;
  unsigned size = 1;
  if (next_ == Kind::kTnt8) {
    payload = pos_[0] >> 1;
  } else {
    if (end_ - pos_ < static_cast<std::ptrdiff_t>(kTnt64Size)) return -pte_eos;
    payload = Load8(pos_) >> 16;
    size = kTnt64Size;
  }
  uint64_t bits = 0;
  const uint64_t index = TntIndex(payload, &bits);
  if (index == 0 || tnt_index_ != 0) return Refuse();  // a bad packet, or bits still cached
  tnt_bits_ = bits;
  tnt_index_ = index;
  pos_ += size;
  return 0;
}

int PacketQuery::DecodeTip() {
  const int size = DecodeIp();
  if (size < 0) return size;
  if (pt_event* event = Dequeue(kAtTip)) {
    switch (event->type) {
      case ptev_async_branch:
        consume_packet_ = true;
        EventIp(&event->variant.async_branch.to, event);
        break;
      case ptev_async_paging: EventIp(&event->variant.async_paging.ip, event); break;
      case ptev_exec_mode: EventIp(&event->variant.exec_mode.ip, event); break;
      default: return Refuse();
    }
    event_ = event;
    // The TIP stays while events bind to it, and after an event that does not consume it.
    if (Pending(kAtTip) || !consume_packet_) return 0;
    consume_packet_ = false;
  }
  pos_ += size;
  return 0;
}

int PacketQuery::DecodeTipPge() {
  // Decoded again for the events bound to it (consume_packet_: its enable was taken, and the
  // packet stays until they are): its ip is in the last ip already, and applying it again would
  // change nothing, so only its size is read.
  const int size = consume_packet_ ? kIpSizes[pos_[0] >> 5] + 1 : DecodeIp();
  if (size < 0) return size;
  pt_event* event = nullptr;
  if (!consume_packet_) {
    // The enable first; events bound to the TIP.PGE (MODE.Exec) follow, from the same packet.
    event = Standalone();
    event->type = ptev_enabled;
    if (LastIp(&event->variant.enabled.ip) < 0) return Refuse();  // (-pte_bad_packet)
    EventTime(event);
    tnt_index_ = tnt_bits_ = 0;
    consume_packet_ = true;
    enabled_ = true;
  } else {
    event = Dequeue(kAtTip);
    if (event == nullptr) return Refuse();
    if (event->type != ptev_exec_mode) return Refuse();
    EventIp(&event->variant.exec_mode.ip, event);
  }
  event_ = event;
  if (Pending(kAtTip)) return 0;
  consume_packet_ = false;
  pos_ += size;
  return 0;
}

int PacketQuery::DecodeTipPgd() {
  const int size = DecodeIp();
  if (size < 0) return size;
  pt_event* event = Dequeue(kAtTip);
  if (event != nullptr) {
    switch (event->type) {
      case ptev_async_branch: {  // FUP + TIP.PGD: tracing stopped at the FUP's ip
        const uint64_t at = event->variant.async_branch.from;
        event->type = ptev_async_disabled;
        event->variant.async_disabled.at = at;
        EventIp(&event->variant.async_disabled.ip, event);
        break;
      }
      case ptev_async_paging: case ptev_exec_mode:
        event->ip_suppressed = 1;
        break;
      default:
        return Refuse();
    }
  } else {
    event = Standalone();
    event->type = ptev_disabled;
    EventIp(&event->variant.disabled.ip, event);
    EventTime(event);
  }
  event_ = event;
  if (Pending(kAtTip)) return 0;
  enabled_ = false;
  pos_ += size;
  return 0;
}

int PacketQuery::DecodeFup() {
  const int size = DecodeIp();
  if (size < 0) return size;
  if (pt_event* event = Dequeue(kAtFup)) {
    // An overflow that resolved while tracing, at this FUP's ip (the only event modelled that
    // binds to a FUP: MODE.TSX, EXSTOP, MWAIT and PTW are refused). It consumes the packet.
    if (LastIp(&event->variant.overflow.ip) < 0) return Refuse();  // (needs the ip)
    event_ = event;
    if (Pending(kAtFup)) return 0;
    pos_ += size;
    return 0;
  }
  uint64_t ip = 0;
  if (LastIp(&ip) < 0) return Refuse();
  pt_event* event = Enqueue(kAtTip);
  if (event == nullptr) return Refuse();
  event->type = ptev_async_branch;
  event->variant.async_branch.from = ip;
  EventTime(event);
  pos_ += size;
  return 0;
}

int PacketQuery::HeaderFup() {
  uint64_t ip = 0;
  int ipc = 0;
  const int size = ReadIp(&ip, &ipc);
  if (size < 0) return size == kRefused ? Refuse() : size;
  if (bdm70_ && !enabled_) {
    // Erratum BDM70: a FUP in PSB+ before a TIP.PGE, while tracing is off, is spurious.
    const int follows = Bdm70TipPgeFollows(pos_ + size);
    if (follows < 0) return Refuse();
    if (follows != 0) {
      pos_ += size;
      return 0;
    }
  }
  const int updated = DecodeIp();
  if (updated < 0) return updated;
  if (ipc != 0) enabled_ = true;
  pos_ += size;
  return 0;
}

int PacketQuery::Bdm70TipPgeFollows(const uint8_t* pos) const {
  // Skips what may lie between (libipt's list: PAD, TSC, CBR, PSBEND, PIP, MODE, VMCS, TMA, MTC,
  // CYC, MNT); any other packet says no. Sizes as the packet decoder's.
  for (;;) {
    Kind kind;
    const int status = FetchAt(pos, &kind);
    if (status == -pte_eos) return 0;
    if (status != 0) return kRefused;  // (VMCS, MNT: not modelled)
    const std::ptrdiff_t left = end_ - pos;
    int size = 0;
    switch (kind) {
      case Kind::kTipPge: return 1;
      case Kind::kPsbend: size = 2; break;
      case Kind::kPip: size = kPipSize; break;
      case Kind::kMode:
        size = 2;
        if (left >= 2 && (pos[1] & 0xe0) > 0x20) return kRefused;  // (a bad packet)
        break;
      default:
        size = SkippedPacketSize(kind, pos);
        if (size == -pte_eos) return 0;  // (the end of the trace)
        if (size == kRefused) return kRefused;
        if (size == 0) return 0;
        break;
    }
    if (size > left) return 0;  // (the end of the trace)
    pos += size;
  }
}

int PacketQuery::SkippedPacketSize(Kind kind, const uint8_t* pos) const {
  const std::ptrdiff_t left = end_ - pos;
  int size = 0;
  switch (kind) {
    case Kind::kPad: size = 1; break;
    case Kind::kTsc: size = kTscSize; break;
    case Kind::kCbr: size = kCbrSize; break;
    case Kind::kMtc: size = 2; break;
    case Kind::kTma:
      size = kTmaSize;
      // Reserved bits set: the packet decoder's error, or with SKZ84 an invalid packet of
      // another size (pt_pkt_decode_tma); not modelled.
      if (left >= size && (pos[4] != 0 || (pos[6] & 0xfe) != 0)) return kRefused;
      break;
    case Kind::kCyc:
      size = 1;
      if ((pos[0] & 0x04) != 0) {
        while (size < left && (pos[size] & 0x01) != 0) ++size;
        ++size;
        if (size > 10) return kRefused;  // (a bad packet)
      }
      break;
    default: return 0;
  }
  return size > left ? -pte_eos : size;
}

int PacketQuery::DecodeMode(bool header) {
  if (end_ - pos_ < 2) return -pte_eos;
  const uint8_t payload = pos_[1];
  if ((payload & 0xe0) != 0) return Refuse();  // MODE.TSX (not modelled) or a bad leaf
  const bool csl = (payload & 0x01) != 0, csd = (payload & 0x02) != 0;
  const pt_exec_mode mode = csl ? (csd ? ptem_unknown : ptem_64bit)
                                : (csd ? ptem_32bit : ptem_16bit);
  pt_event* event = Enqueue(header ? kAtPsbend : kAtTip);
  if (event == nullptr) return Refuse();
  event->type = ptev_exec_mode;
  event->variant.exec_mode.mode = mode;
  if (!header) EventTime(event);
  pos_ += 2;
  return 0;
}

int PacketQuery::DecodePip(bool header) {
  if (end_ - pos_ < static_cast<std::ptrdiff_t>(kPipSize)) return -pte_eos;
  const uint64_t payload = Load8(pos_) >> 16;
  const uint64_t cr3 = (payload >> 1) << 5;
  const bool non_root = (payload & 1) != 0;
  pt_event* event = nullptr;
  if (!header && Find(kAtTip, ptev_async_branch) == nullptr) {
    event = Standalone();
    event->type = ptev_paging;
    event->variant.paging.cr3 = cr3;
    event->variant.paging.non_root = non_root ? 1 : 0;
    event_ = event;
  } else {
    event = Enqueue(header ? kAtPsbend : kAtTip);
    if (event == nullptr) return Refuse();
    event->type = ptev_async_paging;
    event->variant.async_paging.cr3 = cr3;
    event->variant.async_paging.non_root = non_root ? 1 : 0;
  }
  if (!header) EventTime(event);
  pos_ += kPipSize;
  return 0;
}

int PacketQuery::DecodePsb() {
  const uint8_t* psb = pos_;
  if (end_ - pos_ < static_cast<std::ptrdiff_t>(kPsbSize)) return -pte_eos;
  if (!IsPsbAt(pos_, end_)) return Refuse();
  if (skl168_) calibration_.check_skl168 = true;
  pos_ += kPsbSize;
  // The header: status packets up to PSBEND, with the last ip starting afresh.
  last_ip_ = 0;
  have_ip_ = ip_suppressed_ = false;
  int status = 0;
  for (;;) {
    status = Fetch();
    if (status != 0) break;
    // PSBEND's decode publishes the header's events; an OVF ends the header too (pdff_psbend),
    // and its decode publishes them first.
    if (next_ == Kind::kPsbend || next_ == Kind::kOvf) return 0;
    status = DecodeHeader();
    if (status != 0) break;
  }
  if (status != -pte_eos) return Refuse();
  // Cut off by the end: back to the PSB, the header's events dropped.
  pos_ = psb;
  queues_[kAtPsbend].begin = queues_[kAtPsbend].end = 0;
  next_ = Kind::kPsb;
  return status;
}

int PacketQuery::DecodePsbend() {
  const int published = PsbendEvent();
  if (published != 0) return published < 0 ? published : 0;
  if (end_ - pos_ < 2) return -pte_eos;
  pos_ += 2;
  return 0;
}

int PacketQuery::PsbendEvent() {
  pt_event* event = Dequeue(kAtPsbend);
  if (event == nullptr) return 0;
  // One header event per decode, each a status update with the time at PSBEND (or the OVF).
  event->status_update = 1;
  EventTime(event);
  switch (event->type) {
    case ptev_async_paging: EventIp(&event->variant.async_paging.ip, event); break;
    case ptev_exec_mode: EventIp(&event->variant.exec_mode.ip, event); break;
    case ptev_cbr: break;
    default: return Refuse();
  }
  event_ = event;
  return 1;
}

int PacketQuery::DecodeOvf() {
  // The events of a PSB+ the OVF ended come first, one per decode, the OVF staying.
  const int published = PsbendEvent();
  if (published != 0) return published < 0 ? published : 0;
  // The decoder starts afresh but for its time (pt_qry_reset, the time kept): no last ip, no
  // TNT bits, no events waiting, no calibration, pt_qry_time's time reset, tracing off.
  const Clock clock = clock_;
  Reset();
  clock_ = clock;
  pos_ += 2;  // (FetchAt saw both bytes)
  // The overflow binds to the FUP that follows when it resolved while tracing (only timing
  // packets between), else it stands alone and tracing is off until it is enabled again.
  const int fup = OvfFupFollows(pos_);
  if (fup == kRefused) return Refuse();
  pt_event* event = nullptr;
  if (fup > 0) {
    if (apl12_) return Refuse();  // (the FUP may be spurious: pt_qry_handle_apl12)
    event = Enqueue(kAtFup);
    if (event == nullptr) return Refuse();
    enabled_ = true;
  } else {
    // No FUP, or the end of the trace. SKD010: the FUP may have been dropped while tracing
    // went on (pt_qry_handle_skd010 looks further).
    if (skd010_) return Refuse();
    event = Standalone();
    event->ip_suppressed = 1;
    event_ = event;
  }
  event->type = ptev_overflow;
  EventTime(event);
  return 0;
}

int PacketQuery::OvfFupFollows(const uint8_t* pos) const {
  // pt_pkt_find_ovf_fup: 1 at a FUP, 0 at a packet that needs tracing off (PSB, TIP.PGE, MODE,
  // PIP, OVF), past timing packets and PAD; -pte_eos at the end (a packet cut off there too).
  // A packet libipt's packet decoder rejects, or a TNT, TIP, TIP.PGD or PSBEND (-pte_bad_context,
  // or APL11's spurious TIP.PGD), or one not modelled: refused.
  for (;;) {
    Kind kind;
    const int status = FetchAt(pos, &kind);
    if (status == -pte_eos) return -pte_eos;
    if (status != 0) return kRefused;
    const std::ptrdiff_t left = end_ - pos;
    switch (kind) {
      case Kind::kFup: case Kind::kTipPge: {
        const int size = kIpSizes[pos[0] >> 5];
        if (size < 0) return kRefused;  // (a bad packet)
        if (left < size + 1) return -pte_eos;
        return kind == Kind::kFup ? 1 : 0;
      }
      case Kind::kPsb:
        if (left < static_cast<std::ptrdiff_t>(kPsbSize)) return -pte_eos;
        return IsPsbAt(pos, end_) ? 0 : kRefused;
      case Kind::kMode:
        if (left < 2) return -pte_eos;
        return (pos[1] & 0xe0) > 0x20 ? kRefused : 0;
      case Kind::kPip: return left < static_cast<std::ptrdiff_t>(kPipSize) ? -pte_eos : 0;
      case Kind::kOvf: return 0;
      default: {
        const int size = SkippedPacketSize(kind, pos);
        if (size == -pte_eos) return -pte_eos;
        if (size <= 0) return kRefused;  // (TNT, TIP, TIP.PGD, PSBEND; a bad packet)
        pos += size;
        break;
      }
    }
  }
}

int PacketQuery::DecodeTsc(bool header) {
  if (end_ - pos_ < static_cast<std::ptrdiff_t>(kTscSize)) return -pte_eos;
  const int status = ApplyTsc(Load8(pos_) >> 8, header);
  if (status < 0) return status;
  pos_ += kTscSize;
  return 0;
}

int PacketQuery::DecodeCbr(bool header) {
  if (end_ - pos_ < static_cast<std::ptrdiff_t>(kCbrSize)) return -pte_eos;
  const uint8_t ratio = pos_[2];
  const int status = ApplyCbr(ratio, header);
  if (status < 0) return status;
  pt_event* event = header ? Enqueue(kAtPsbend) : Standalone();
  if (event == nullptr) return Refuse();
  event->type = ptev_cbr;
  event->variant.cbr.ratio = ratio;
  if (!header) {
    event_ = event;
    EventTime(event);
  }
  pos_ += kCbrSize;
  return 0;
}

int PacketQuery::DecodeTma() {
  if (end_ - pos_ < static_cast<std::ptrdiff_t>(kTmaSize)) return -pte_eos;
  const uint16_t ctc = static_cast<uint16_t>(pos_[2] | (pos_[3] << 8));
  const uint16_t fc = static_cast<uint16_t>(pos_[5] | (pos_[6] << 8));
  if ((fc & ~0x1ffu) != 0 || pos_[4] != 0) {  // reserved bits set: a bad packet
    // Erratum SKZ84 (VMX TSC scaling or offsetting corrupts packets; Skylake, Ice Lake and
    // Sapphire Rapids servers): libipt 2.0.5's pt_qry_decode_tma skips such a TMA and one byte
    // more, and goes on. Without the erratum it is a decode error (refused).
    if (!skz84_ || end_ - pos_ < static_cast<std::ptrdiff_t>(kTmaSize) + 1) return Refuse();
    pos_ += kTmaSize + 1;
    return 0;
  }
  const int status = ApplyTma(ctc, fc);
  if (status < 0) return status;
  pos_ += kTmaSize;
  return 0;
}

int PacketQuery::DecodeMtc() {
  if (end_ - pos_ < 2) return -pte_eos;
  const int status = ApplyMtc(pos_[1]);
  if (status < 0) return status;
  pos_ += 2;
  return 0;
}

[[gnu::always_inline]] inline int PacketQuery::DecodeCyc() {
  // The first byte: opcode, 5 payload bits, an extension bit; then 7 bits a byte while the
  // byte before has its extension bit set.
  if ((pos_[0] & 0x04) == 0) {  // one byte (nothing for SKD007 to look at)
    const int status = ApplyCyc(pos_[0] >> 3);
    if (status < 0) return status;
    ++pos_;
    return 0;
  }
  const uint8_t* at = pos_;
  uint64_t value = at[0] >> 3;
  bool more = (at[0] & 0x04) != 0;
  unsigned shift = 5;
  ++at;
  while (more) {
    if (at >= end_) return -pte_eos;
    const uint64_t bits = *at++;
    more = (bits & 0x01) != 0;
    const unsigned at_shift = shift;
    shift += 7;
    if (shift > kCycBits) return Refuse();  // (a bad packet)
    value |= (bits >> 1) << at_shift;
  }
  const int size = static_cast<int>(at - pos_);
  // Erratum SKD007: a two-byte CYC of 0x20-0x3f before an OVF is the OVF's first byte, padded.
  if (skd007_ && size == 2 && (value & ~uint64_t{0x1f}) == 0x20 && at < end_ && *at == 0xf3) {
    ++pos_;
    return 0;
  }
  const int status = ApplyCyc(value);
  if (status < 0) return status;
  pos_ += size;
  return 0;
}

// ---- Time ----------------------------------------------------------------------------------

// The clock's one step on the hot path (a CYC packet comes before nearly every TNT and TIP when
// cyc_thresh is 0), kept beside DecodeCyc so that it inlines there; the rest of the clock (TSC,
// CBR, TMA, MTC and calibration) is in packet_query_time.cpp.
[[gnu::always_inline]] inline int PacketQuery::ApplyCyc(uint64_t cyc) {
  calibration_.cyc_mtc += cyc;
  calibration_.cyc_tsc += cyc;
  const uint64_t fcr = HaveFcr() ? calibration_.fcr : 0;
  Clock& clock = clock_;
  if (fcr == 0) {  // not calibrated yet: counted as lost
    clock.lost_cyc += 1;
    return 0;
  }
  uint64_t fc = clock.fc;
  if (fc == 0 && clock.ctc != clock.ctc_cyc) {
    // The first CYC after an MTC: the cycles before that MTC are in its time already.
    uint32_t delta = 0;
    int status = CtcDelta(clock.ctc, clock.ctc_cyc, &delta);
    if (status < 0) return status;
    uint64_t mtc_fc = 0;
    status = CtcToFc(delta, &mtc_fc);
    if (status < 0) return status == -pte_bad_config ? 0 : status;
    const uint64_t old_cyc = (mtc_fc << kFcrShift) / fcr;
    cyc = cyc < old_cyc ? 0 : cyc - old_cyc;
  }
  fc += (cyc * fcr) >> kFcrShift;
  clock.fc = fc;
  clock.tsc = clock.base + fc;
  return 0;
}

// ---- Events --------------------------------------------------------------------------------

pt_event* PacketQuery::Standalone() {
  std::memset(&standalone_, 0, sizeof standalone_);
  return &standalone_;
}

pt_event* PacketQuery::Enqueue(Binding binding) {
  Queue& queue = queues_[binding];
  const uint8_t end = static_cast<uint8_t>((queue.end + 1) % kQueueSlots);
  if (queue.begin == (end + 1) % kQueueSlots) return nullptr;  // full
  pt_event* event = &queue.events[queue.end];
  queue.end = end;
  std::memset(event, 0, sizeof *event);
  return event;
}

pt_event* PacketQuery::Dequeue(Binding binding) {
  Queue& queue = queues_[binding];
  if (queue.begin == queue.end) return nullptr;
  pt_event* event = &queue.events[queue.begin];
  queue.begin = static_cast<uint8_t>((queue.begin + 1) % kQueueSlots);
  return event;
}

pt_event* PacketQuery::Find(Binding binding, pt_event_type type) {
  Queue& queue = queues_[binding];
  for (uint8_t at = queue.begin; at != queue.end; at = (at + 1) % kQueueSlots) {
    if (queue.events[at].type == type) return &queue.events[at];
  }
  return nullptr;
}

void PacketQuery::EventTime(pt_event* event) const {
  // The time at the packet (not pt_qry_time's, which is the time at the last query).
  event->tsc = clock_.tsc;
  event->lost_mtc = clock_.lost_mtc;
  event->lost_cyc = clock_.lost_cyc;
  if (clock_.have_tsc) event->has_tsc = 1;
}

void PacketQuery::EventIp(uint64_t* ip, pt_event* event) const {
  if (LastIp(ip) < 0) event->ip_suppressed = 1;
}

}  // namespace ptscope::decode
