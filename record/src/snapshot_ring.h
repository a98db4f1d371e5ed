// The last N bytes of one PT stream, always starting at a PSB so that a snapshot decodes from its
// first byte. Whole PSB segments are dropped from the front when the ring is over capacity (the
// newest segment is always kept, so the ring may exceed its capacity by less than one segment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace ptscope::record {

class SnapshotRing {
 public:
  explicit SnapshotRing(uint64_t capacity) : capacity_(capacity) {}

  void Append(const uint8_t* bytes, size_t size);
  // The next appended byte starts a PSB packet. Bytes before the very first PSB are discarded.
  void MarkPsb();

  // Stream offset of the first retained byte (a PSB), and the retained bytes.
  uint64_t start_offset() const { return start_; }
  std::span<const uint8_t> contents() const {
    return {buffer_.data() + head_, buffer_.size() - head_};
  }
  uint64_t end_offset() const { return start_ + (buffer_.size() - head_); }
  uint64_t capacity() const { return capacity_; }

 private:
  void Trim();

  uint64_t capacity_;
  std::vector<uint8_t> buffer_;
  size_t head_ = 0;          // index in buffer_ of stream offset start_
  uint64_t start_ = 0;
  std::deque<uint64_t> psbs_;  // stream offsets of retained PSBs, ascending; front() == start_
};

}  // namespace ptscope::record
