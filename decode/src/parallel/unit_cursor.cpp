// Cutting a piece into decode units as it is read (see unit_cursor.h).
#include "parallel/unit_cursor.h"

#include <algorithm>
#include <utility>

namespace ptscope::decode {

void PieceUnitCursor::ScanMore() {
  if (piece_.in_memory()) {
    // The whole piece is at hand: scan it a window's worth at a time.
    const size_t owned_end = std::min(piece_.size, scanned_to_ + 4 * kPsbWindowReach);
    ScanPsbs(piece_.bytes.data(), piece_.size, 0, owned_end, config_, &from_, &found_);
    marks_.insert(marks_.end(), found_.begin(), found_.end());
    found_.clear();
    scanned_to_ = owned_end;
    scanned_all_ = owned_end == piece_.size;
    return;
  }
  // Chunk by chunk, each read once: a window scans all but its last kPsbWindowReach bytes (all
  // of them once the last chunk is in), which the next window starts with. It also keeps the
  // bytes from the first PSB not yet cut into a unit on, for Bytes().
  while (next_chunk_ < piece_.chunks.size() &&
         base_ + window_.size() - scanned_to_ < 2 * kPsbWindowReach) {
    const Piece::ChunkRef& chunk = piece_.chunks[next_chunk_];
    Result<std::span<const uint8_t>> read =
        reader_.Bytes(piece_, chunk.piece_offset, chunk.piece_offset + chunk.size);
    if (!read) {
      // What was read before stays good: the piece ends there, and the error comes after its
      // units.
      read_error_ = std::move(read).error();
      readable_end_ = base_ + window_.size();
      next_chunk_ = piece_.chunks.size();
      break;
    }
    std::span<const uint8_t> bytes = *read;
    ++next_chunk_;
    window_.insert(window_.end(), bytes.begin(), bytes.end());
    // The window holds the bytes now; the reader would keep a second copy of the chunk.
    reader_.Forget();
  }
  const bool last = next_chunk_ == piece_.chunks.size();
  const size_t owned_end = last ? base_ + window_.size() : base_ + window_.size() - kPsbWindowReach;
  ScanPsbs(window_.data(), window_.size(), base_, owned_end, config_, &from_, &found_);
  marks_.insert(marks_.end(), found_.begin(), found_.end());
  found_.clear();
  scanned_to_ = owned_end;
  scanned_all_ = last;
  size_t keep_from = owned_end;
  if (!marks_.empty()) keep_from = std::min(keep_from, marks_.front().offset);
  window_.erase(window_.begin(), window_.begin() + static_cast<ptrdiff_t>(keep_from - base_));
  base_ = keep_from;
  // A chunk's worth of capacity would stay with every cursor (one per CPU stream) otherwise.
  if (window_.capacity() > 8 * kPsbWindowReach && window_.size() < window_.capacity() / 4) {
    window_.shrink_to_fit();
  }
}

std::span<const uint8_t> PieceUnitCursor::Bytes(const DecodeUnitSpan& unit) const {
  if (piece_.in_memory()) return {piece_.bytes.data() + unit.begin, unit.decode_end - unit.begin};
  return {window_.data() + (unit.begin - base_), unit.decode_end - unit.begin};
}

Result<std::optional<DecodeUnitSpan>> PieceUnitCursor::Next() {
  // Only PSBs libipt accepts start or end units: the pattern can, rarely, occur in a payload.
  for (;;) {
    while (!marks_.empty() && !marks_.front().state.valid) marks_.pop_front();
    if (!marks_.empty()) break;
    if (scanned_all_) {
      if (!read_error_) return std::optional<DecodeUnitSpan>();
      Error error = std::move(*read_error_);
      read_error_.reset();
      return Unexpected(std::move(error));
    }
    ScanMore();
  }
  DecodeUnitSpan unit;
  unit.begin = marks_.front().offset;
  unit.start = marks_.front().state;
  size_t next = 1;
  for (;;) {
    while (next < marks_.size() &&
           (marks_[next].offset - unit.begin < target_bytes_ || !marks_[next].state.valid)) {
      ++next;
    }
    if (next < marks_.size() || scanned_all_) break;
    ScanMore();
  }
  unit.end = next < marks_.size() ? marks_[next].offset : readable_end_;
  unit.decode_end = unit.end;
  if (next < marks_.size() && marks_[next].state.header_end > unit.end) {
    unit.decode_end = marks_[next].state.header_end;
  }
  marks_.erase(marks_.begin(), marks_.begin() + static_cast<ptrdiff_t>(next));
  return std::optional<DecodeUnitSpan>(unit);
}

}  // namespace ptscope::decode
