#include "pt_aux_ring.h"

#include <algorithm>

#include "perf_ring.h"
#include "ptscope/format.h"

namespace ptscope::record {

std::optional<AuxPiece> AuxStreamReader::Read(const AuxRingView& ring) {
  uint64_t head = LoadAcquire(&ring.page->aux_head);
  uint64_t tail = ring.page->aux_tail;  // only we write it
  if (head == tail && !truncated_pending_) return std::nullopt;
  AuxPiece piece;
  uint64_t available = head - tail;
  if (available > ring.aux_size) {  // cannot happen in non-overwrite mode; keep the newest bytes
    piece.bytes_lost_before = available - ring.aux_size;
    piece.flags |= format::kPtTruncated;
    tail = head - ring.aux_size;
    available = ring.aux_size;
  }
  if (truncated_pending_) {
    piece.flags |= format::kPtTruncated;
    truncated_pending_ = false;
  }
  piece.stream_offset = tail;
  CopyFromRing(ring.aux, ring.aux_size, tail, available, &piece.data);
  StoreRelease(&ring.page->aux_tail, head);
  return piece;
}

namespace {

bool TailHasData(const AuxRingView& ring) {
  uint64_t probe = std::min(kWrapProbeBytes, ring.aux_size);
  const uint8_t* end = ring.aux + ring.aux_size;
  return std::any_of(end - probe, end, [](uint8_t b) { return b != 0; });
}

}  // namespace

std::optional<AuxPiece> AuxSnapshotReader::Take(const AuxRingView& ring) {
  uint64_t raw = LoadAcquire(&ring.page->aux_head);
  uint64_t offset = raw % ring.aux_size;
  bool running_count = raw >= ring.aux_size;
  if (running_count || (have_previous_ && offset < last_offset_) || TailHasData(ring))
    wrapped_ = true;
  AuxPiece piece;
  piece.flags = format::kPtSnapshot;
  if (!wrapped_) {
    uint64_t from = have_previous_ ? last_offset_ : 0;
    if (offset == from) return std::nullopt;
    piece.stream_offset = from;
    CopyFromRing(ring.aux, ring.aux_size, from, offset - from, &piece.data);
  } else {
    piece.flags |= format::kPtOverwritten;
    // With a running count the stream position is exact; otherwise it is unknown and the piece
    // continues the stream right after the previous one (decoders sync at the next PSB anyway).
    piece.stream_offset = running_count ? raw - ring.aux_size : stream_end_;
    CopyFromRing(ring.aux, ring.aux_size, offset, ring.aux_size, &piece.data);
  }
  last_offset_ = offset;
  have_previous_ = true;
  stream_end_ = piece.stream_offset + piece.data.size();
  return piece;
}

}  // namespace ptscope::record
