// UnitDecoder: decodes planned units on the workers (parallel/unit_pool.h), each worker with its
// own code images and caches: QueryWalker on our PacketQuery first; for a unit holding packets
// PacketQuery does not model, the walker on libipt's query decoder; for trace the walker does not
// model, libipt's block decoder (units are independent, so nothing of a refused attempt is kept).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "capture/decoder_setup.h"
#include "capture/sideband_timeline.h"
#include "capture/streams.h"
#include "flow/block_facts.h"
#include "flow/code_images.h"
#include "flow/query_walker.h"
#include "flow/unit_events.h"
#include "work_unit.h"

namespace ptscope::decode {

class UnitDecoder {
 public:
  // `images` has one CodeImages per worker (see the pipeline: one section cache each); `code`
  // (may be null: no kInlineChange) must be thread-safe. All must outlive the decoder. With
  // `list_insns` the units list their instructions (--format insns).
  UnitDecoder(const DecoderSetup& setup, const SidebandTimeline& timeline,
              const std::vector<Stream>& streams, std::vector<const CodeImages*> images,
              CodeFacts* code, bool walker, bool list_insns = false);

  // Decodes `work` on worker `worker` into `out` (empty). Thread-safe for distinct workers.
  void Decode(const WorkUnit& work, unsigned worker, UnitEvents& out);

  uint64_t units() const { return units_; }
  uint64_t libipt_units() const { return libipt_units_; }  // the walker refused them
  // PacketQuery refused them: the walker read them with libipt's query decoder (or, when it
  // refused too, libipt's block decoder: then they count in libipt_units as well).
  uint64_t packet_units() const { return packet_units_; }

 private:
  // How a unit is walked: the first that does not refuse it wins.
  enum class Walk { kOwnPackets, kLibiptPackets, kLibiptBlocks };
  // Returns false when the walk refused the unit (`packets_refused`: PacketQuery did).
  bool DecodeWith(const WorkUnit& work, unsigned worker, Walk walk, UnitEvents& out,
                  bool* packets_refused = nullptr);

  const DecoderSetup& setup_;
  const SidebandTimeline& timeline_;
  const std::vector<Stream>& streams_;
  std::vector<const CodeImages*> images_;
  CodeFacts* code_;
  bool list_insns_;
  std::vector<BlockFacts> facts_;           // per worker
  std::vector<WalkerCache> walker_caches_;  // per worker; empty: libipt walks the code
  std::atomic<uint64_t> units_{0}, libipt_units_{0}, packet_units_{0};
};

}  // namespace ptscope::decode
