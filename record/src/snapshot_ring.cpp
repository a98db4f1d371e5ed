#include "snapshot_ring.h"

namespace ptscope::record {

void SnapshotRing::Append(const uint8_t* bytes, size_t size) {
  if (psbs_.empty()) {  // not at a PSB yet: nothing a decoder could start from
    start_ += size;
    return;
  }
  buffer_.insert(buffer_.end(), bytes, bytes + size);
  Trim();
}

void SnapshotRing::MarkPsb() {
  if (psbs_.empty()) {
    buffer_.clear();
    head_ = 0;
  }
  psbs_.push_back(end_offset());
  Trim();
}

void SnapshotRing::Trim() {
  while (psbs_.size() > 1 && end_offset() - start_ > capacity_) {
    psbs_.pop_front();
    head_ += static_cast<size_t>(psbs_.front() - start_);
    start_ = psbs_.front();
  }
  // Compact once the dead prefix dominates: amortized O(1) per byte.
  if (head_ > (1u << 16) && head_ > buffer_.size() / 2) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<ptrdiff_t>(head_));
    head_ = 0;
  }
}

}  // namespace ptscope::record
