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

// Non-zero bytes in the ring's last kWrapProbeBytes, past the head (a never-wrapped head may
// itself be in that region).
bool TailHasData(const AuxRingView& ring, uint64_t head) {
  const uint64_t from = std::max(head, ring.aux_size - std::min(kWrapProbeBytes, ring.aux_size));
  return std::any_of(ring.aux + from, ring.aux + ring.aux_size, [](uint8_t b) { return b != 0; });
}

// `length` bytes of the ring ending just before `end` (an offset), oldest first.
std::vector<uint8_t> Before(const AuxRingView& ring, uint64_t end, uint64_t length) {
  std::vector<uint8_t> bytes;
  CopyFromRing(ring.aux, ring.aux_size, end + ring.aux_size - length, length, &bytes);
  return bytes;
}

}  // namespace

void AuxSnapshotReader::KeepReference(const AuxRingView& ring, uint64_t offset) {
  const uint64_t length = std::min(reference_bytes_, ring.aux_size / 2);
  reference_ = Before(ring, offset, length);
}

// Whether the hardware came round to (or past) the previous head since the last snapshot.
bool AuxSnapshotReader::WentRound(const AuxRingView& ring, uint64_t offset) const {
  const uint64_t into = (last_offset_ + ring.aux_size - offset) % ring.aux_size;
  if (into != 0 && into < reference_.size()) return true;  // the head is inside the reference
  return Before(ring, last_offset_, reference_.size()) != reference_;
}

std::optional<AuxPiece> AuxSnapshotReader::TakeRunningCount(const AuxRingView& ring,
                                                            uint64_t head) {
  const uint64_t fresh = head - (have_previous_ ? last_head_ : 0);
  last_head_ = head;
  have_previous_ = true;
  if (fresh == 0) return std::nullopt;
  AuxPiece piece;
  piece.flags = format::kPtSnapshot;
  const uint64_t length = std::min(fresh, ring.aux_size);
  if (fresh > ring.aux_size) {
    wrapped_ = true;
    piece.flags |= format::kPtOverwritten;
    piece.bytes_lost_before = fresh - ring.aux_size;
  }
  piece.stream_offset = head - length;
  CopyFromRing(ring.aux, ring.aux_size, head - length, length, &piece.data);
  stream_end_ = head;
  return piece;
}

std::optional<AuxPiece> AuxSnapshotReader::Take(const AuxRingView& ring) {
  const uint64_t raw = LoadAcquire(&ring.page->aux_head);
  if (raw >= ring.aux_size) return TakeRunningCount(ring, raw);
  const uint64_t offset = raw;
  AuxPiece piece;
  piece.flags = format::kPtSnapshot;
  piece.stream_offset = stream_end_;
  bool whole = false;
  if (!have_previous_) {
    whole = TailHasData(ring, offset);  // intel_pt_first_wrap()
    if (!whole && offset == 0) return std::nullopt;
    if (!whole) CopyFromRing(ring.aux, ring.aux_size, 0, offset, &piece.data);
  } else if (!WentRound(ring, offset)) {
    if (offset == last_offset_) return std::nullopt;
    const uint64_t fresh = (offset + ring.aux_size - last_offset_) % ring.aux_size;
    CopyFromRing(ring.aux, ring.aux_size, last_offset_, fresh, &piece.data);
  } else {
    // Round once, ending inside the reference, with the bytes between the head and the previous
    // head unchanged: only those are old; every other byte is new and nothing was lost.
    const uint64_t old = (last_offset_ + ring.aux_size - offset) % ring.aux_size;
    const bool once = old != 0 && old < reference_.size() &&
                      Before(ring, last_offset_, old) ==
                          std::vector<uint8_t>(reference_.end() - static_cast<ptrdiff_t>(old),
                                               reference_.end());
    if (once) {
      CopyFromRing(ring.aux, ring.aux_size, last_offset_, ring.aux_size - old, &piece.data);
    } else {
      whole = true;
    }
  }
  if (whole) {
    wrapped_ = true;
    piece.flags |= format::kPtOverwritten;
    CopyFromRing(ring.aux, ring.aux_size, offset, ring.aux_size, &piece.data);
  }
  last_offset_ = offset;
  have_previous_ = true;
  KeepReference(ring, offset);
  stream_end_ = piece.stream_offset + piece.data.size();
  return piece;
}

}  // namespace ptscope::record
