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
// gap at trace offset N with the byte at N-1 being 0x0d (the first such gap). Then both decoders
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

namespace ptscope::decode::testing {

struct DecodedText {
  std::string text;
  uint64_t instructions = 0;
  bool operator==(const DecodedText&) const = default;
};

struct DecodedPair {
  DecodedText libipt, walker;
};

// The offset N of the walker's first "no ip at trace offset N" gap whose packet just before N is
// a suppressed-IP TIP (0x0d); 0 when there is none (N is at least 1).
inline size_t SuppressedTipGap(const std::string& walker_text, std::span<const uint8_t> pt) {
  static constexpr char kNoIp[] = "no ip at trace offset ";
  for (size_t at = walker_text.find(kNoIp); at != std::string::npos;
       at = walker_text.find(kNoIp, at + 1)) {
    const char* digits = walker_text.c_str() + at + sizeof kNoIp - 1;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(digits, &end, 10);
    if (end != digits && n >= 1 && n <= pt.size() && pt[n - 1] == 0x0d) return n;
  }
  return 0;
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
  const size_t gap = SuppressedTipGap(both.walker.text, pt);
  if (gap == 0) {
    return "QueryWalker and libipt's block decoder differ:\n--- libipt (" +
           std::to_string(both.libipt.instructions) + " instructions)\n" + both.libipt.text +
           "--- walker (" + std::to_string(both.walker.instructions) + " instructions)\n" +
           both.walker.text;
  }
  const std::string where = "the suppressed-IP TIP at trace offset " + std::to_string(gap - 1);
  std::string before = CompareDecoders(pt.first(gap - 1), decode);
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
