// EventBuffer: a growable array of FlowEvents, like std::vector, that also hands out the slot
// after its last event (Spare) and keeps what was written there only if asked (Commit).
//
// Why not std::vector: the flow decoder's per-block work writes the event of the previous block's
// branch only when that block ended in a call, return or jump, which in real control flow is
// unpredictable; as a branch it was mispredicted for nearly two blocks in three (callgrind's
// branch simulation). Writing the slot always and keeping it by adding 0 or 1 to the size takes
// no branch, and a vector has no defined way to write past its size.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>

#include "events.h"

namespace ptscope::decode {

class EventBuffer {
 public:
  EventBuffer() = default;
  EventBuffer(const EventBuffer& other) { *this = other; }
  EventBuffer& operator=(const EventBuffer& other) {
    if (this != &other) {
      clear();
      reserve(other.size_);
      std::copy(other.begin(), other.end(), data_.get());
      size_ = other.size_;
    }
    return *this;
  }
  EventBuffer(EventBuffer&& other) noexcept { *this = std::move(other); }
  EventBuffer& operator=(EventBuffer&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  FlowEvent* data() { return data_.get(); }
  const FlowEvent* data() const { return data_.get(); }
  FlowEvent* begin() { return data_.get(); }
  FlowEvent* end() { return data_.get() + size_; }
  const FlowEvent* begin() const { return data_.get(); }
  const FlowEvent* end() const { return data_.get() + size_; }
  FlowEvent& operator[](size_t i) { return data_[i]; }
  const FlowEvent& operator[](size_t i) const { return data_[i]; }
  FlowEvent& back() { return data_[size_ - 1]; }
  const FlowEvent& back() const { return data_[size_ - 1]; }

  void clear() { size_ = 0; }  // keeps the capacity (buffers are reused unit after unit)
  void reserve(size_t capacity) {
    if (capacity > capacity_) Reallocate(capacity);
  }
  // A default FlowEvent appended (as vector::emplace_back()).
  FlowEvent& emplace_back() {
    FlowEvent* slot = Spare();
    *slot = FlowEvent{};
    ++size_;
    return *slot;
  }
  void push_back(const FlowEvent& event) { *Spare() = event; ++size_; }

  // The slot after the last event: written freely, kept only by Commit(true). Its previous
  // contents are unspecified (a stale event of an earlier use of the buffer).
  FlowEvent* Spare() {
    if (size_ == capacity_) [[unlikely]] Reallocate(std::max<size_t>(64, 2 * capacity_));
    return data_.get() + size_;
  }
  // `keep` is 0 or 1.
  void Commit(size_t keep) { size_ += keep; }

 private:
  void Reallocate(size_t capacity) {
    std::unique_ptr<FlowEvent[]> grown(new FlowEvent[capacity]);
    std::copy(begin(), end(), grown.get());
    data_ = std::move(grown);
    capacity_ = capacity;
  }

  std::unique_ptr<FlowEvent[]> data_;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace ptscope::decode
