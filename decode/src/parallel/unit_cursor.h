// PieceUnitCursor: a piece of a stream cut into decode units at PSBs, as it is read (through a
// PieceReader, capture/piece_reader.h), for the UnitPlanner (unit_planner.h) and CaptureStartNs.
#pragma once

#include <intel-pt.h>

#include <cstddef>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "capture/piece_reader.h"
#include "capture/streams.h"
#include "parallel/psb_units.h"
#include "ptscope/result.h"

namespace ptscope::decode {

// A piece's decode units one at a time: a unit starts at a PSB libipt accepts and runs to the
// first accepted one at least target_bytes after it (or to the piece's end). The piece is read
// through a sliding window (ScanPsbs): each chunk is read once, and what is held is the last unit
// cut, a chunk and 2 * kPsbWindowReach bytes past it, and their PSB marks, whatever the length of
// the piece. The pipeline plans units with it while earlier ones are decoded, so nothing grows
// with the capture.
class PieceUnitCursor {
 public:
  // `reader` and `piece` must outlive the cursor.
  PieceUnitCursor(PieceReader& reader, const Piece& piece, const pt_config& config,
                  size_t target_bytes)
      : reader_(reader),
        piece_(piece),
        config_(config),
        target_bytes_(target_bytes),
        readable_end_(piece.size) {}

  // The next unit; nullopt after the last. When a chunk cannot be read, the units of what was
  // read before it come first (the last one ends where the readable bytes end), then one error
  // naming the archive and the chunk; then nullopt.
  Result<std::optional<DecodeUnitSpan>> Next();
  // The bytes [unit.begin, unit.decode_end) of the unit Next() returned last, valid until the
  // next call of Next().
  std::span<const uint8_t> Bytes(const DecodeUnitSpan& unit) const;
  // Piece bytes scanned so far.
  size_t scanned() const { return scanned_to_; }

 private:
  // Scans the next window of the piece, appending its PSB marks; sets scanned_all_ at the end,
  // or where a chunk could not be read (read_error_).
  void ScanMore();

  PieceReader& reader_;
  const Piece& piece_;
  const pt_config& config_;
  const size_t target_bytes_;
  std::deque<PsbMark> marks_;   // scanned, not yet grouped into a unit
  std::vector<PsbMark> found_;  // ScanPsbs' output, moved to marks_
  // Chunked pieces: bytes [base_, base_ + window_.size()), from the first mark in marks_ (or
  // where the scan goes on) to the end of what was read.
  std::vector<uint8_t> window_;
  size_t base_ = 0;
  size_t from_ = 0;             // where the PSB chain goes on (ScanPsbs)
  size_t scanned_to_ = 0;       // marks before this offset are known
  size_t next_chunk_ = 0;
  bool scanned_all_ = false;
  size_t readable_end_;                 // the piece's size, or where a read failed
  std::optional<Error> read_error_;     // to report after the units before it
};

}  // namespace ptscope::decode
