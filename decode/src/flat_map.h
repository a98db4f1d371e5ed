// FlatMap<K, V, Hash>: an open-addressing hash map (linear probing, power-of-two table) for the
// caches on the decode hot path: function starts and inlined depths per address, encoded frames
// per FrameId. std::unordered_map costs a modulo and two dependent pointer loads per look-up;
// this is one multiply, a shift and (almost always) one probe into a flat array.
// Never shrinks, no erase. AddressMap<V> is the common case, keyed by a 64-bit address.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ptscope::decode {

// Fibonacci hashing: the top bits of key * 2^64/phi, well spread even for aligned addresses.
struct AddressHash {
  uint64_t operator()(uint64_t key) const { return key * 0x9e3779b97f4a7c15ull; }
};

template <typename K, typename V, typename Hash>
class FlatMap {
 public:
  FlatMap() { Rehash(64); }

  // The value for `key`, or nullptr.
  V* Find(const K& key) {
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (!slot.used) return nullptr;
      if (slot.key == key) return &slot.value;
    }
  }

  // Like std::unordered_map::try_emplace: (value, inserted); a new value is default-constructed.
  // The pointer stays valid until the next insertion.
  std::pair<V*, bool> TryEmplace(const K& key) {
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.used && slot.key == key) return {&slot.value, false};
      if (!slot.used) {
        if ((size_ + 1) * 4 > slots_.size() * 3) {  // keep the load factor under 3/4
          Rehash(slots_.size() * 2);
          return TryEmplace(key);
        }
        slot.used = true;
        slot.key = key;
        ++size_;
        return {&slot.value, true};
      }
    }
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    K key{};
    bool used = false;
    V value{};
  };
  size_t Home(const K& key) const { return static_cast<size_t>(Hash()(key) >> shift_); }
  void Rehash(size_t capacity) {  // capacity: a power of two
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (Slot& slot : old) {
      if (slot.used) *TryEmplace(slot.key).first = std::move(slot.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

template <typename V>
using AddressMap = FlatMap<uint64_t, V, AddressHash>;

}  // namespace ptscope::decode
