// PieceReader: contiguous PT bytes of a Piece, read on demand.
//
// A piece held in memory is handed out in place. A piece that refers to archive chunks
// (Piece::chunks) is read chunk by chunk through an ArchiveReader of its own (every read checked
// and decompressed as the first pass did), or, for raw chunks (a perf.data's trace bytes), with
// pread; it keeps the last chunk, so reads in order are one look-up per chunk, and a range that
// spans a chunk boundary is copied into a scratch buffer. One reader per thread; memory is a few
// chunks, whatever the length of the capture. PieceUnitCursor (below) cuts a piece into decode
// units as it reads it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "parallel/psb_units.h"
#include "ptscope/format.h"
#include "ptscope/result.h"
#include "capture/streams.h"

namespace ptscope::decode {

class PieceReader {
 public:
  explicit PieceReader(std::string archive_path) : path_(std::move(archive_path)) {}
  ~PieceReader();
  PieceReader(const PieceReader&) = delete;
  PieceReader& operator=(const PieceReader&) = delete;
  PieceReader(PieceReader&& other) noexcept
      : path_(std::move(other.path_)),
        reader_(std::move(other.reader_)),
        raw_fd_(std::exchange(other.raw_fd_, -1)),
        cached_(std::move(other.cached_)),
        scratch_(std::move(other.scratch_)) {}

  // Bytes [begin, end) of `piece` (end <= piece.size), valid until the next call. An error names
  // the archive and the chunk (e.g. the file changed since it was first read).
  Result<std::span<const uint8_t>> Bytes(const Piece& piece, size_t begin, size_t end);
  // Frees the chunk kept for the next read (for a caller that copied what it needed).
  void Forget();

 private:
  // The PT bytes of `ref` (an archive chunk, which should hold ref.size of them, or raw bytes).
  Result<const std::vector<uint8_t>*> ChunkBytes(const Piece::ChunkRef& ref);
  Status ReadRaw(uint64_t offset, uint64_t size, std::vector<uint8_t>& out);

  struct Cached {
    uint64_t chunk_offset = UINT64_MAX;
    std::vector<uint8_t> bytes;
  };
  std::string path_;
  std::unique_ptr<format::ArchiveReader> reader_;  // opened at the first read
  int raw_fd_ = -1;                                // for raw chunks, opened at the first read
  Cached cached_;
  std::vector<uint8_t> scratch_;  // a range that spans chunks
};

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
