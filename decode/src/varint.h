// LEB128 varints and zigzag signs for the compact encodings of what waits in scratch files (the
// held-back slice records of stack/record_spill.h, a per-CPU listing's runs in
// listing/run_store.h): small steps take a byte, and every uint64_t comes back exactly.
#pragma once

#include <cstdint>

namespace ptscope::decode {

// At most 10 bytes a value.
inline constexpr unsigned kMaxVarintBytes = 10;

inline uint8_t* PutVarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// Reads a varint from [p, end): null when it runs past `end` or past 10 bytes (bad bytes).
// kChecked false: the caller knows that 10 bytes are there.
template <bool kChecked>
inline const uint8_t* GetVarint(const uint8_t* p, const uint8_t* end, uint64_t* v) {
  if (kChecked && p == end) [[unlikely]] return nullptr;
  uint64_t b = *p++;
  if (b < 0x80) [[likely]] {
    *v = b;
    return p;
  }
  uint64_t result = b & 0x7f;
  for (unsigned shift = 7;; shift += 7) {
    if ((kChecked && p == end) || shift >= 7 * kMaxVarintBytes) [[unlikely]] return nullptr;
    b = *p++;
    result |= (b & 0x7f) << shift;  // the 10th byte's high bits fall off: modulo 2^64
    if (b < 0x80) break;
  }
  *v = result;
  return p;
}

// Addresses go up and down: the sign in the low bit keeps small steps either way small.
inline uint64_t Zigzag(uint64_t delta) {
  return (delta << 1) ^ static_cast<uint64_t>(static_cast<int64_t>(delta) >> 63);
}
inline uint64_t Unzigzag(uint64_t v) { return (v >> 1) ^ (~(v & 1) + 1); }

}  // namespace ptscope::decode
