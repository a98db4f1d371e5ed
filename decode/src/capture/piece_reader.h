// PieceReader: contiguous PT bytes of a Piece, read on demand.
//
// A piece held in memory is handed out in place. A piece that refers to archive chunks
// (Piece::chunks) is read chunk by chunk through format's PtChunkReader (a .ptar chunk checked and
// decompressed as the first pass did, a perf.data's raw trace bytes with pread); it keeps the last
// chunk, so reads in order are one look-up per chunk, and a range that spans a chunk boundary is
// copied into a scratch buffer. One reader per thread; memory is a few chunks, whatever the length
// of the capture. PieceUnitCursor (parallel/unit_cursor.h) cuts a piece into decode units as it reads it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ptscope/format.h"
#include "ptscope/pt_chunks.h"
#include "ptscope/result.h"
#include "capture/streams.h"

namespace ptscope::decode {

class PieceReader {
 public:
  explicit PieceReader(std::string archive_path) : chunks_(std::move(archive_path)) {}

  // Bytes [begin, end) of `piece` (end <= piece.size), valid until the next call. An error names
  // the archive and the chunk (e.g. the file changed since it was first read).
  Result<std::span<const uint8_t>> Bytes(const Piece& piece, size_t begin, size_t end);
  // Frees the chunk kept for the next read (for a caller that copied what it needed).
  void Forget();

 private:
  // The PT bytes of `ref` (an archive chunk, which should hold ref.size of them, or raw bytes).
  Result<std::span<const uint8_t>> ChunkBytes(const Piece::ChunkRef& ref);

  format::PtChunkReader chunks_;  // keeps the last chunk read
  std::vector<uint8_t> scratch_;  // a range that spans chunks
};

}  // namespace ptscope::decode
