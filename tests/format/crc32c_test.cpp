#include "crc32c.h"

#include <doctest/doctest.h>

#include <string_view>
#include <vector>

namespace ptscope::format {
namespace {

std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST_CASE("crc32c matches the published check values") {
  CHECK(Crc32c(Bytes("")) == 0u);
  CHECK(Crc32c(Bytes("123456789")) == 0xE3069283u);  // the standard CRC-32C check value
  // RFC 3720 (iSCSI) appendix B.4 test vectors.
  std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<uint8_t>(i);
    down[i] = static_cast<uint8_t>(31 - i);
  }
  CHECK(Crc32c(zeros) == 0x8A9136AAu);
  CHECK(Crc32c(ones) == 0x62A8AB43u);
  CHECK(Crc32c(up) == 0x46DD794Eu);
  CHECK(Crc32c(down) == 0x113FDB5Cu);
}

TEST_CASE("crc32c extends across any split point") {
  std::string_view text = "The quick brown fox jumps over the lazy dog, twice over.";
  uint32_t whole = Crc32c(Bytes(text));
  for (size_t split = 0; split <= text.size(); ++split) {
    auto a = Bytes(text.substr(0, split)), b = Bytes(text.substr(split));
    CHECK(Crc32cExtend(Crc32c(a), b.data(), b.size()) == whole);
  }
}

TEST_CASE("the software and the dispatched (hardware) crc32c agree") {
  CHECK(Crc32cExtendSoftware(0, reinterpret_cast<const uint8_t*>("123456789"), 9) == 0xE3069283u);
  std::vector<uint8_t> bytes(300);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t start = 0; start < 9; ++start) {  // every alignment
    for (size_t len = 0; start + len <= bytes.size(); len += 7) {
      CAPTURE(start);
      CAPTURE(len);
      CHECK(Crc32cExtend(0x12345678u, bytes.data() + start, len) ==
            Crc32cExtendSoftware(0x12345678u, bytes.data() + start, len));
    }
  }
}

}  // namespace
}  // namespace ptscope::format
