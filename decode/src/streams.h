// PT streams of an archive as the pipeline decodes them: per-thread or per-CPU, each a list of
// contiguous pieces (cut wherever data was lost) that are split into decode units at PSBs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "events.h"
#include "flow_decoder.h"
#include "psb_units.h"
#include "ptscope/format.h"
#include "sideband_timeline.h"

namespace ptscope::decode {

struct Piece {
  std::vector<uint8_t> bytes;
  std::string loss_before;  // non-empty: data was lost before this piece
  std::vector<DecodeUnitSpan> units;
};

struct Stream {
  ThreadKey key;     // per-thread streams
  int32_t cpu = -1;  // >= 0: a per-CPU stream; threads come from the CPU's schedule
  std::vector<Piece> pieces;
  std::vector<TriggerMark> triggers;
};

// "cpu N" or "thread N", for messages.
std::string StreamName(const Stream& stream);

// Groups PT pieces by stream, in stream_offset order, cut wherever data was lost; per-thread
// streams first, by tid.
std::vector<Stream> CollectStreams(const format::Archive& archive, const SidebandTimeline& timeline);

// --threads: whether `key`'s tid or pid is listed (an empty list selects every thread).
bool Selected(const std::vector<uint32_t>& threads, const ThreadKey& key);

}  // namespace ptscope::decode
