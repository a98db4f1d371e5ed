// On-demand PT reads (see piece_reader.h).
#include "piece_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <variant>

#include "ptscope/file_read.h"

namespace ptscope::decode {

PieceReader::~PieceReader() {
  if (raw_fd_ >= 0) ::close(raw_fd_);
}

Status PieceReader::ReadRaw(uint64_t offset, uint64_t size, std::vector<uint8_t>& out) {
  if (raw_fd_ < 0) {
    raw_fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (raw_fd_ < 0) {
      const int err = errno;  // before the message's allocations
      return Unexpected(ErrcFromErrno(err),
                        path_ + ": cannot open again to read its trace: " + std::strerror(err));
    }
  }
  out.resize(static_cast<size_t>(size));
  const format::FileRead read = format::ReadFileAt(raw_fd_, offset, out.size(), out.data());
  if (read.bytes == out.size()) return Ok();
  return Unexpected(Errc::kCorrupt,
                    path_ + ": offset " + std::to_string(offset + read.bytes) + ": " +
                        (read.error != 0 ? std::string("read failed: ") + std::strerror(read.error)
                                         : "the file ends before the trace read first (it "
                                           "changed while it was decoded?)"));
}

Result<const std::vector<uint8_t>*> PieceReader::ChunkBytes(const Piece::ChunkRef& ref) {
  const uint64_t chunk_offset = ref.chunk_offset, size = ref.size;
  if (cached_.chunk_offset == chunk_offset) return &cached_.bytes;
  if (ref.raw) {
    cached_.chunk_offset = UINT64_MAX;  // until the read succeeds
    PTSCOPE_TRY(ReadRaw(chunk_offset, size, cached_.bytes));
    cached_.chunk_offset = chunk_offset;
    return &cached_.bytes;
  }
  if (reader_ == nullptr) {
    PTSCOPE_ASSIGN_OR_RETURN(reader_, format::ArchiveReader::Open(path_));
  }
  PTSCOPE_ASSIGN_OR_RETURN(format::Chunk chunk, reader_->ReadChunkAt(chunk_offset));
  auto* pt = std::get_if<format::PtDataChunk>(&chunk);
  if (pt == nullptr || pt->data.size() != size) {
    return Unexpected(Errc::kCorrupt,
                      path_ + ": the PT data chunk at offset " + std::to_string(chunk_offset) +
                          " is not the one read first (the file changed while it was decoded?)");
  }
  cached_.chunk_offset = chunk_offset;
  cached_.bytes = std::move(pt->data);
  return &cached_.bytes;
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
    PTSCOPE_ASSIGN_OR_RETURN(const std::vector<uint8_t>* bytes, ChunkBytes(*chunk));
    return std::span<const uint8_t>(bytes->data() + (begin - chunk->piece_offset), end - begin);
  }
  scratch_.resize(end - begin);
  size_t done = 0;
  for (; done < scratch_.size(); ++chunk) {
    PTSCOPE_ASSIGN_OR_RETURN(const std::vector<uint8_t>* bytes, ChunkBytes(*chunk));
    size_t from = begin + done - chunk->piece_offset;
    size_t n = std::min<size_t>(chunk->size - from, scratch_.size() - done);
    std::memcpy(scratch_.data() + done, bytes->data() + from, n);
    done += n;
  }
  return std::span<const uint8_t>(scratch_.data(), scratch_.size());
}

Result<std::vector<DecodeUnitSpan>> SplitPieceAtPsb(PieceReader& reader, const Piece& piece,
                                                    const pt_config& config, size_t target_bytes) {
  if (piece.in_memory()) return SplitAtPsb(piece.bytes.data(), piece.size, config, target_bytes);
  // A sliding window over the piece, each chunk read once: the window owns all but its last
  // kPsbWindowReach bytes (all of them once the last chunk is in), which the next window starts
  // with.
  std::vector<PsbMark> marks;
  std::vector<uint8_t> window;
  size_t base = 0;  // piece offset of window[0]
  size_t from = 0;  // where the PSB chain goes on
  size_t next_chunk = 0;
  for (;;) {
    while (next_chunk < piece.chunks.size() && window.size() < 2 * kPsbWindowReach) {
      const Piece::ChunkRef& chunk = piece.chunks[next_chunk++];
      PTSCOPE_ASSIGN_OR_RETURN(std::span<const uint8_t> bytes,
                               reader.Bytes(piece, chunk.piece_offset,
                                            chunk.piece_offset + chunk.size));
      window.insert(window.end(), bytes.begin(), bytes.end());
    }
    const bool last = next_chunk == piece.chunks.size();
    const size_t owned = last ? window.size() : window.size() - kPsbWindowReach;
    ScanPsbs(window.data(), window.size(), base, base + owned, config, &from, &marks);
    if (last) break;
    window.erase(window.begin(), window.begin() + static_cast<ptrdiff_t>(owned));
    base += owned;
  }
  return GroupPsbs(marks, piece.size, target_bytes);
}

}  // namespace ptscope::decode
