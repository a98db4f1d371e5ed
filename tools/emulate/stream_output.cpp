#include "stream_output.h"

namespace ptscope::emulate {
namespace {
constexpr size_t kFullPieceBytes = 1 << 20;
}

StreamOutput::StreamOutput(record::CaptureWriter* writer, uint32_t stream_id, uint32_t pid,
                           uint32_t tid, uint64_t snapshot_size, int32_t cpu)
    : writer_(writer), stream_id_(stream_id), pid_(pid), tid_(tid), cpu_(cpu),
      full_(snapshot_size == 0),
      ring_(snapshot_size) {}

void StreamOutput::Append(const uint8_t* bytes, size_t size) {
  total_ += size;
  if (!full_) {
    ring_.Append(bytes, size);
    return;
  }
  pending_.insert(pending_.end(), bytes, bytes + size);
  if (pending_.size() >= kFullPieceBytes && deferred_) deferred_ = Flush(reference_tsc_);
}

void StreamOutput::MarkPsb() {
  if (!full_) ring_.MarkPsb();
}

format::PtDataChunk StreamOutput::MakeChunk(uint64_t offset, uint64_t reference_tsc) const {
  format::PtDataChunk chunk;
  chunk.stream_id = stream_id_;
  chunk.cpu = cpu_;
  chunk.pid = pid_;
  chunk.tid = tid_;
  chunk.stream_offset = offset;
  chunk.reference_tsc = reference_tsc;
  return chunk;
}

Status StreamOutput::Flush(uint64_t reference_tsc) {
  if (!full_ || pending_.empty()) return Ok();
  format::PtDataChunk chunk = MakeChunk(pending_offset_, reference_tsc);
  chunk.data = std::move(pending_);
  pending_.clear();
  pending_offset_ = total_;
  return writer_->WritePt(chunk);
}

Status StreamOutput::WriteSnapshot(uint32_t index, uint64_t reference_tsc) {
  if (full_) return Flush(reference_tsc);
  const auto bytes = ring_.contents();
  if (bytes.empty()) return Ok();
  format::PtDataChunk chunk = MakeChunk(ring_.start_offset(), reference_tsc);
  chunk.flags = format::kPtSnapshot | (ring_.start_offset() > 0 ? uint32_t{format::kPtOverwritten} : 0u);
  chunk.snapshot_index = index;
  chunk.data.assign(bytes.begin(), bytes.end());
  return writer_->WritePt(chunk);
}

}  // namespace ptscope::emulate
