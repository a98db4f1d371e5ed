// Decoding one unit on a worker (see unit_decoder.h).
#include "flow/unit_decoder.h"

#include "flow/flow_decoder.h"

namespace ptscope::decode {

UnitDecoder::UnitDecoder(const DecoderSetup& setup, const SidebandTimeline& timeline,
                         const std::vector<Stream>& streams, std::vector<const CodeImages*> images,
                         CodeFacts* code, bool walker, bool list_insns)
    : setup_(setup),
      timeline_(timeline),
      streams_(streams),
      images_(std::move(images)),
      code_(code),
      list_insns_(list_insns),
      facts_(images_.size()) {
  if (walker) walker_caches_ = std::vector<WalkerCache>(images_.size());
}

void UnitDecoder::Decode(const WorkUnit& work, unsigned worker, UnitEvents& out) {
  units_.fetch_add(1, std::memory_order_relaxed);
  if (walker_caches_.empty()) {
    DecodeWith(work, worker, Walk::kLibiptBlocks, out);
    return;
  }
  // Three tiers: the walker on our packets; where PacketQuery refuses (packets it does not
  // model, damage), the walker on libipt's query decoder; where the walker refuses, libipt's
  // block decoder. A refused attempt's events are dropped: the output is the same either way.
  bool packets_refused = false;
  if (DecodeWith(work, worker, Walk::kOwnPackets, out, &packets_refused)) return;
  if (packets_refused) {
    packet_units_.fetch_add(1, std::memory_order_relaxed);
    out.Reset();
    if (DecodeWith(work, worker, Walk::kLibiptPackets, out)) return;
  }
  libipt_units_.fetch_add(1, std::memory_order_relaxed);
  out.Reset();
  DecodeWith(work, worker, Walk::kLibiptBlocks, out);
}

// One attempt, by `walk`: the worker's QueryWalker reading packets with our PacketQuery or with
// libipt's query decoder, or libipt's block decoder. Returns false when the attempt refused the
// unit's trace; `packets_refused` (when given) then says whether PacketQuery was the cause.
bool UnitDecoder::DecodeWith(const WorkUnit& work, unsigned worker, Walk walk, UnitEvents& out,
                             bool* packets_refused) {
  const Stream& stream = streams_[work.stream];
  FlowDecoder decoder(setup_, *images_[worker], stream.key.pid, facts_[worker], out);
  decoder.SetCodeFacts(code_);
  if (walk != Walk::kLibiptBlocks) {
    decoder.UseWalker(&walker_caches_[worker], walk == Walk::kOwnPackets);
  }
  if (list_insns_) decoder.ListInstructions();
  decoder.SetOffsetBase(work.span.begin);
  if (work.unit > 0) decoder.SetContinuation();
  if (work.has_next) decoder.SetNextUnit(work.next_start);
  if (stream.cpu >= 0) {
    decoder.FollowCpu(&timeline_, static_cast<uint32_t>(stream.cpu));
  } else {
    out.runs.push_back(UnitEvents::Run{stream.key, 0, 0, 0});
  }
  if (!work.unreadable.empty()) {
    decoder.FailSegment(work.unreadable);
    return true;
  }
  decoder.DecodeSegment(work.bytes.data(), work.bytes.size());
  if (packets_refused != nullptr) *packets_refused = decoder.packets_refused();
  return !decoder.walker_refused();
}

}  // namespace ptscope::decode
