// The differential between QueryWalker and libipt's block decoder, as the decode fuzz target, its
// replay (fuzz-replay-decode) and decode-core-flow run it: both decode the same PT and their
// outputs must be the same byte for byte, with exactly one exception, defined here.
//
// The exception (issue 24, fuzz class 2b): a TIP whose IP is suppressed (the one-byte packet
// 0x0d, IPBytes 000b) taken at an indirect branch. The branch's target is not in the trace, so
// decoding cannot go on: QueryWalker ends with a "no ip" gap naming the trace offset just past
// that TIP and resumes at the next PSB, as libipt 2.0.5 does when its block cache has no entry
// for the branch (pt_blk_proceed_with_trace returns -pte_noip). When the branch's section already
// has a block-cache entry for it, pt_blk_proceed_no_event_cached (cases ptbq_indirect,
// ptbq_ind_call, ptbq_return) calls pt_blk_indirect_branch and never looks at pts_ip_suppressed:
// the decoder stays at the branch, the next pt_blk_next runs the branch a second time and queries
// the trace again, so libipt reports an instruction that did not run and fails later (or goes
// on). Whether that entry exists depends on what every decoder sharing the section decoded
// before (with --jobs > 1, on the order the units ran), so libipt's answer there is not a fact
// about the trace and cannot be compared.
//
// The rule, strict everywhere else: when the two outputs differ, the walker must have a "no ip"
// gap at trace offset N that follows a suppressed-IP TIP and nothing but timing packets (the
// first such gap; the query decoder reads past those before it reports). Then both decoders
// decode the PT before that TIP, and (when there is one) the PT from the first PSB at or after N,
// each on its own; each pair of outputs must agree by this same rule. Anything else is a
// difference. Each decode gets fresh libipt sections (the pipeline and DecodeWith build their
// image-section cache per decode), so one decode's block cache never reaches another's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include <intel-pt.h>

namespace ptscope::decode::testing {

struct DecodedText {
  std::string text;
  uint64_t instructions = 0;
  bool operator==(const DecodedText&) const = default;
};

struct DecodedPair {
  DecodedText libipt, walker;
};

// Where a suppressed-IP TIP's "no ip" gap points: libipt's query decoder reads ahead past timing
// packets once it has the TIP (pt_qry_read_ahead stops only at a TNT, TIP, FUP or event packet),
// so the gap's offset N lies after the TIP and any PAD, CYC, MTC, TSC, TMA, CBR or MNT behind it.
struct SuppressedTip {
  size_t tip = 0;  // the 0x0d's offset
  size_t gap = 0;  // N: the offset the walker's gap names; 0 when there is no such gap
};

inline bool IsTimingPacket(pt_packet_type type) {
  switch (type) {
    case ppt_pad: case ppt_cyc: case ppt_mtc: case ppt_tsc: case ppt_tma: case ppt_cbr:
    case ppt_mnt:
      return true;
    default:
      return false;
  }
}

// The suppressed-IP TIP that ends at N after nothing but timing packets, found with libipt's
// packet decoder from the first PSB, resynchronizing at the next PSB after an undecodable packet
// as the query decoder does; {0, 0} when no packet boundary at N has one (a TIP and timing
// packets that end the trace are found too: the decoder's offset is then N = pt.size()).
inline SuppressedTip SuppressedTipEndingAt(std::span<const uint8_t> pt, size_t n) {
  if (pt.empty()) return {};
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t*>(pt.data());
  config.end = config.begin + pt.size();
  pt_packet_decoder* decoder = pt_pkt_alloc_decoder(&config);
  if (decoder == nullptr) return {};
  SuppressedTip found;
  size_t tip = 0;
  bool tip_open = false;  // a suppressed TIP, then only timing packets so far
  int status = pt_pkt_sync_forward(decoder);
  while (status >= 0) {
    uint64_t offset = 0;
    pt_pkt_get_offset(decoder, &offset);
    if (offset == n && tip_open) {
      found = {tip, n};
      break;
    }
    if (offset >= n) break;
    pt_packet packet;
    status = pt_pkt_next(decoder, &packet, sizeof packet);
    if (status < 0) {
      tip_open = false;
      status = pt_pkt_sync_forward(decoder);
      continue;
    }
    if (packet.type == ppt_tip && packet.payload.ip.ipc == pt_ipc_suppressed) {
      tip = offset;
      tip_open = true;
    } else if (!IsTimingPacket(packet.type)) {
      tip_open = false;
    }
  }
  pt_pkt_free_decoder(decoder);
  return found;
}

// The walker's first "no ip at trace offset N" gap that follows a suppressed-IP TIP (0x0d) and
// nothing but timing packets; {0, 0} when there is none.
inline SuppressedTip SuppressedTipGap(const std::string& walker_text,
                                      std::span<const uint8_t> pt) {
  static constexpr char kNoIp[] = "no ip at trace offset ";
  for (size_t at = walker_text.find(kNoIp); at != std::string::npos;
       at = walker_text.find(kNoIp, at + 1)) {
    const char* digits = walker_text.c_str() + at + sizeof kNoIp - 1;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(digits, &end, 10);
    if (end == digits || n < 1 || n > pt.size()) continue;
    const SuppressedTip found = SuppressedTipEndingAt(pt, n);
    if (found.gap != 0) return found;
  }
  return {};
}

// The first PSB (02 82 repeated 8 times) at or after `from`; pt.size() when there is none.
inline size_t NextPsb(std::span<const uint8_t> pt, size_t from) {
  for (size_t i = from; i + 16 <= pt.size(); ++i) {
    bool psb = true;
    for (size_t k = 0; k < 16 && psb; ++k) psb = pt[i + k] == (k % 2 == 0 ? 0x02 : 0x82);
    if (psb) return i;
  }
  return pt.size();
}

// Empty when the decoders agree by the rule above; otherwise what differs, both outputs in full.
// `decode(pt)` decodes `pt` (trace offsets counted from its first byte) with both decoders and
// returns a DecodedPair.
template <typename DecodeBoth>
std::string CompareDecoders(std::span<const uint8_t> pt, const DecodeBoth& decode) {
  const DecodedPair both = decode(pt);
  if (both.libipt == both.walker) return {};
  const SuppressedTip suppressed = SuppressedTipGap(both.walker.text, pt);
  const size_t gap = suppressed.gap;
  if (gap == 0) {
    return "QueryWalker and libipt's block decoder differ:\n--- libipt (" +
           std::to_string(both.libipt.instructions) + " instructions)\n" + both.libipt.text +
           "--- walker (" + std::to_string(both.walker.instructions) + " instructions)\n" +
           both.walker.text;
  }
  const std::string where =
      "the suppressed-IP TIP at trace offset " + std::to_string(suppressed.tip);
  std::string before = CompareDecoders(pt.first(suppressed.tip), decode);
  if (!before.empty()) return "in the trace before " + where + ": " + before;
  const size_t psb = NextPsb(pt, gap);
  if (psb == pt.size()) return {};
  std::string after = CompareDecoders(pt.subspan(psb), decode);
  if (!after.empty()) {
    return "in the trace from the PSB at offset " + std::to_string(psb) + " after " + where +
           " (offsets from that PSB): " + after;
  }
  return {};
}

}  // namespace ptscope::decode::testing
