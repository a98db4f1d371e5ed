// Minimal protobuf wire encoding into a reusable buffer (no allocation once warmed up).
// Nested messages are built in their own ProtoBuffer and appended with Message().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ptscope::decode {

class ProtoBuffer {
 public:
  void Clear() { buf_.clear(); }
  bool empty() const { return buf_.empty(); }
  std::string_view view() const { return buf_; }

  void Varint(uint32_t field, uint64_t value) {
    Tag(field, 0);
    PutVarint(value);
  }
  void Bool(uint32_t field, bool value) { Varint(field, value ? 1 : 0); }
  void Bytes(uint32_t field, std::string_view bytes) {
    Tag(field, 2);
    PutVarint(bytes.size());
    buf_.append(bytes);
  }
  void Message(uint32_t field, const ProtoBuffer& child) { Bytes(field, child.view()); }

  void PutVarint(uint64_t value) {
    while (value >= 0x80) {
      buf_.push_back(static_cast<char>((value & 0x7f) | 0x80));
      value >>= 7;
    }
    buf_.push_back(static_cast<char>(value));
  }

 private:
  void Tag(uint32_t field, uint32_t wire_type) { PutVarint((uint64_t{field} << 3) | wire_type); }
  std::string buf_;
};

}  // namespace ptscope::decode
