// PieceReader: contiguous PT bytes of a Piece, read on demand.
//
// A piece held in memory is handed out in place. A piece that refers to archive chunks
// (Piece::chunks) is read chunk by chunk through an ArchiveReader of its own (every read checked
// and decompressed as the first pass did), or, for raw chunks (a perf.data's trace bytes), with
// pread; it keeps the last chunk: decode units are much smaller
// than chunks and come in order, so most units are one look-up, and a unit that spans a chunk
// boundary is copied into a scratch buffer. One reader per thread; memory is a few chunks,
// whatever the length of the capture.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "psb_units.h"
#include "ptscope/format.h"
#include "ptscope/result.h"
#include "streams.h"

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

// SplitAtPsb for a piece, read through a sliding window (each chunk read once, at most a chunk
// plus 2 * kPsbWindowReach held) when it is not in memory: the same units as SplitAtPsb over the
// whole piece (see ScanPsbs).
Result<std::vector<DecodeUnitSpan>> SplitPieceAtPsb(PieceReader& reader, const Piece& piece,
                                                    const pt_config& config, size_t target_bytes);

}  // namespace ptscope::decode
