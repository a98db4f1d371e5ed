// Minimal protobuf wire encoding into a reusable buffer (no allocation once warmed up).
// Nested messages are built in their own ProtoBuffer and appended with Message().
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ptscope::decode {

class ProtoBuffer {
 public:
  void Clear() { size_ = 0; }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  static size_t VarintSize(uint64_t value) {
    size_t n = 1;
    for (; value >= 0x80; value >>= 7) ++n;
    return n;
  }
  std::string_view view() const { return std::string_view(buf_.data(), size_); }

  void Varint(uint32_t field, uint64_t value) {
    Tag(field, 0);
    PutVarint(value);
  }
  void Bool(uint32_t field, bool value) { Varint(field, value ? 1 : 0); }
  void Bytes(uint32_t field, std::string_view bytes) {
    Tag(field, 2);
    PutVarint(bytes.size());
    Append(bytes);
  }
  void Message(uint32_t field, const ProtoBuffer& child) { Bytes(field, child.view()); }

  // Unchecked encoding into memory the caller has sized (the hot packets): each returns the end.
  static char* PutVarintTo(char* p, uint64_t value) {
    while (value >= 0x80) {
      *p++ = static_cast<char>((value & 0x7f) | 0x80);
      value >>= 7;
    }
    *p++ = static_cast<char>(value);
    return p;
  }
  static char* AppendTo(char* p, std::string_view bytes) {
    std::memcpy(p, bytes.data(), bytes.size());
    return p + bytes.size();
  }

  void Append(std::string_view bytes) {
    Reserve(bytes.size());
    if (!bytes.empty()) std::memcpy(buf_.data() + size_, bytes.data(), bytes.size());
    size_ += bytes.size();
  }
  void PutVarint(uint64_t value) {
    Reserve(10);
    char* p = buf_.data() + size_;
    while (value >= 0x80) {
      *p++ = static_cast<char>((value & 0x7f) | 0x80);
      value >>= 7;
    }
    *p++ = static_cast<char>(value);
    size_ = static_cast<size_t>(p - buf_.data());
  }

 private:
  void Tag(uint32_t field, uint32_t wire_type) { PutVarint((uint64_t{field} << 3) | wire_type); }
  // Writes go through data() into a string sized ahead: one capacity check per field.
  void Reserve(size_t n) {
    if (size_ + n > buf_.size()) buf_.resize(std::max(2 * buf_.size(), size_ + n + 64));
  }
  std::string buf_;
  size_t size_ = 0;
};

}  // namespace ptscope::decode
