// SlotStack<T>: the StackTracker's frame stack. A vector's subset (what the tracker uses), with
// the growth out of line: std::vector's push_back and emplace_back carry their reallocation
// inline, which GCC then leaves as a call of its own (and the caller saves registers for it).
// Here a push is a compare and a store, and PushInRoom, after HasRoom(), only the store.
// T must be trivially copyable (slots are reused as they are).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <iterator>
#include <type_traits>
#include <vector>

namespace ptscope::decode {

template <typename T>
class SlotStack {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  using iterator = T*;
  using const_iterator = const T*;

  SlotStack() = default;
  SlotStack(const SlotStack&) = delete;  // data_ points into slots_
  SlotStack& operator=(const SlotStack&) = delete;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  bool HasRoom() const { return size_ < capacity_; }

  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

  // A value-initialized T on top; HasRoom() must hold.
  T& PushInRoom() {
    T& slot = data_[size_++];
    slot = T{};
    return slot;
  }
  T& emplace_back() {
    if (size_ == capacity_) [[unlikely]] Grow(size_ + 1);
    return PushInRoom();
  }
  void push_back(const T& value) {
    if (size_ == capacity_) [[unlikely]] Grow(size_ + 1);
    data_[size_++] = value;
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }
  // Shrinks, or grows with value-initialized slots.
  void resize(size_t size) {
    if (size > capacity_) Grow(size);
    for (size_t i = size_; i < size; ++i) data_[i] = T{};
    size_ = size;
  }
  void assign(size_t count, const T& value) {
    size_ = 0;
    if (count > capacity_) Grow(count);
    std::fill(data_, data_ + count, value);
    size_ = count;
  }
  // Appends [first, last) (a range outside this stack); only at the end.
  template <typename It>
  void insert(T* pos, It first, It last) {
    assert(pos == end());
    (void)pos;
    const size_t count = static_cast<size_t>(std::distance(first, last));
    if (size_ + count > capacity_) Grow(size_ + count);
    std::copy(first, last, data_ + size_);
    size_ += count;
  }

 private:
  [[gnu::noinline]] void Grow(size_t needed) {
    slots_.resize(std::max({needed, 2 * slots_.size(), size_t{64}}));
    data_ = slots_.data();
    capacity_ = slots_.size();
  }

  std::vector<T> slots_;  // every one constructed; [0, size_) in use
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;  // slots_.size(), which would cost a division by sizeof(T)
};

}  // namespace ptscope::decode
