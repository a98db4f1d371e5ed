// Bounds-checked little-endian reading of untrusted bytes, and the matching writer.
// Private to the format library (perf_data/ may include it as "../byte_io.h").
//
// ByteReader is "sticky": the first read that does not fit records the field name and offset,
// returns zero, and every later read fails too. Callers read a whole structure and check ok()
// once, which keeps parsers short while never reading out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ptscope::format {

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  bool ok() const { return failed_field_ == nullptr; }
  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  size_t size() const { return bytes_.size(); }
  // The first field that did not fit, its offset, and how many bytes it needed.
  const char* failed_field() const { return failed_field_; }
  size_t failed_offset() const { return failed_offset_; }
  size_t failed_need() const { return failed_need_; }
  // "field 'name' at offset N needs K bytes, M left" for the first failure.
  std::string FailureText() const {
    if (ok()) return "ok";
    return "field '" + std::string(failed_field_) + "' at offset " +
           std::to_string(failed_offset_) + " needs " + std::to_string(failed_need_) +
           " bytes, " + std::to_string(bytes_.size() - failed_offset_) + " left";
  }

  uint8_t U8(const char* field) { return static_cast<uint8_t>(Le(field, 1)); }
  uint16_t U16(const char* field) { return static_cast<uint16_t>(Le(field, 2)); }
  uint32_t U32(const char* field) { return static_cast<uint32_t>(Le(field, 4)); }
  uint64_t U64(const char* field) { return Le(field, 8); }
  int32_t I32(const char* field) { return static_cast<int32_t>(U32(field)); }
  int64_t I64(const char* field) { return static_cast<int64_t>(U64(field)); }

  // A view of the next n bytes (empty on failure).
  std::span<const uint8_t> Bytes(const char* field, uint64_t n) {
    if (!Need(field, n)) return {};
    std::span<const uint8_t> out = bytes_.subspan(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return out;
  }
  std::vector<uint8_t> Vec(const char* field, uint64_t n) {
    std::span<const uint8_t> view = Bytes(field, n);
    return std::vector<uint8_t>(view.begin(), view.end());
  }
  bool Skip(const char* field, uint64_t n) {
    Bytes(field, n);
    return ok();
  }
  // u32 length, then that many bytes.
  std::string Str32(const char* field) {
    uint32_t n = U32(field);
    std::span<const uint8_t> view = Bytes(field, n);
    return std::string(view.begin(), view.end());
  }
  std::vector<uint8_t> Vec32(const char* field) { return Vec(field, U32(field)); }
  std::vector<uint8_t> Vec64(const char* field) { return Vec(field, U64(field)); }

 private:
  bool Need(const char* field, uint64_t n) {
    if (!ok()) return false;
    if (n > bytes_.size() - pos_) {
      failed_field_ = field;
      failed_offset_ = pos_;
      failed_need_ = static_cast<size_t>(n > SIZE_MAX ? SIZE_MAX : n);
      return false;
    }
    return true;
  }
  uint64_t Le(const char* field, size_t n) {
    if (!Need(field, n)) return 0;
    uint64_t value = 0;
    for (size_t i = 0; i < n; ++i) value |= static_cast<uint64_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += n;
    return value;
  }

  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
  const char* failed_field_ = nullptr;
  size_t failed_offset_ = 0;
  size_t failed_need_ = 0;
};

// Reads a little-endian value at a fixed offset of a buffer the caller already bounds-checked.
inline uint64_t LoadLe(const uint8_t* p, size_t n) {
  uint64_t value = 0;
  for (size_t i = 0; i < n; ++i) value |= static_cast<uint64_t>(p[i]) << (8 * i);
  return value;
}
inline void StoreLe(uint8_t* p, uint64_t value, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(value >> (8 * i));
}

// Appends little-endian values to a byte vector.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}
  size_t size() const { return out_.size(); }
  std::vector<uint8_t>& buffer() { return out_; }  // the vector written to
  void U8(uint8_t v) { out_.push_back(v); }
  void U16(uint16_t v) { Le(v, 2); }
  void U32(uint32_t v) { Le(v, 4); }
  void U64(uint64_t v) { Le(v, 8); }
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Bytes(std::span<const uint8_t> bytes) { out_.insert(out_.end(), bytes.begin(), bytes.end()); }
  void Bytes(std::string_view s) { out_.insert(out_.end(), s.begin(), s.end()); }
  void Zeros(size_t n) { out_.resize(out_.size() + n, 0); }
  void Str32(std::string_view s) { U32(static_cast<uint32_t>(s.size())); Bytes(s); }
  void Vec32(std::span<const uint8_t> v) { U32(static_cast<uint32_t>(v.size())); Bytes(v); }
  void Vec64(std::span<const uint8_t> v) { U64(v.size()); Bytes(v); }
  // Zero bytes up to the next multiple of `align` (measured from the start of the vector).
  void PadTo(size_t align) {
    size_t rem = out_.size() % align;
    if (rem != 0) Zeros(align - rem);
  }

 private:
  void Le(uint64_t v, size_t n) {
    size_t at = out_.size();
    out_.resize(at + n);
    StoreLe(out_.data() + at, v, n);
  }
  std::vector<uint8_t>& out_;
};

}  // namespace ptscope::format
