// On-demand PT reads (see piece_reader.h).
#include "capture/piece_reader.h"

#include <algorithm>
#include <cstring>

namespace ptscope::decode {

Result<std::span<const uint8_t>> PieceReader::ChunkBytes(const Piece::ChunkRef& ref) {
  PTSCOPE_ASSIGN_OR_RETURN(
      std::span<const uint8_t> bytes,
      chunks_.Read(format::Archive::PtDataRef{ref.chunk_offset, ref.size + ref.skip, ref.raw}));
  // Bytes an earlier piece holds (CollectStreams drops overlaps) are not this piece's.
  return bytes.subspan(ref.skip);
}

void PieceReader::Forget() {
  chunks_.Forget();
  std::vector<uint8_t>().swap(scratch_);
}

Result<std::span<const uint8_t>> PieceReader::Bytes(const Piece& piece, size_t begin, size_t end) {
  end = std::min(end, piece.size);
  begin = std::min(begin, end);
  if (piece.in_memory()) return std::span<const uint8_t>(piece.bytes.data() + begin, end - begin);
  if (begin == end) return std::span<const uint8_t>();
  // The chunk holding `begin`: the last one starting at or before it.
  auto chunk = std::upper_bound(piece.chunks.begin(), piece.chunks.end(), begin,
                                [](size_t offset, const Piece::ChunkRef& ref) {
                                  return offset < ref.piece_offset;
                                }) -
               1;
  if (end <= chunk->piece_offset + chunk->size) {  // within one chunk: in place
    PTSCOPE_ASSIGN_OR_RETURN(std::span<const uint8_t> bytes, ChunkBytes(*chunk));
    return bytes.subspan(begin - chunk->piece_offset, end - begin);
  }
  scratch_.resize(end - begin);
  size_t done = 0;
  for (; done < scratch_.size(); ++chunk) {
    PTSCOPE_ASSIGN_OR_RETURN(std::span<const uint8_t> bytes, ChunkBytes(*chunk));
    size_t from = begin + done - chunk->piece_offset;
    size_t n = std::min<size_t>(chunk->size - from, scratch_.size() - done);
    std::memcpy(scratch_.data() + done, bytes.data() + from, n);
    done += n;
  }
  return std::span<const uint8_t>(scratch_.data(), scratch_.size());
}

}  // namespace ptscope::decode
