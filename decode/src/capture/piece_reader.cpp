// On-demand PT reads (see piece_reader.h).
#include "capture/piece_reader.h"

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
  if (pt == nullptr || pt->data.size() != size + ref.skip) {
    return Unexpected(Errc::kCorrupt,
                      path_ + ": the PT data chunk at offset " + std::to_string(chunk_offset) +
                          " is not the one read first (the file changed while it was decoded?)");
  }
  cached_.chunk_offset = chunk_offset;
  cached_.bytes = std::move(pt->data);
  // Bytes an earlier piece holds (CollectStreams drops overlaps) are not this piece's.
  cached_.bytes.erase(cached_.bytes.begin(),
                      cached_.bytes.begin() + static_cast<std::ptrdiff_t>(ref.skip));
  return &cached_.bytes;
}

void PieceReader::Forget() {
  cached_.chunk_offset = UINT64_MAX;
  std::vector<uint8_t>().swap(cached_.bytes);
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
