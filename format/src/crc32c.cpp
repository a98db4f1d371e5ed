// Slicing-by-8 CRC32C: eight 256-entry tables let the loop consume 8 bytes per iteration with
// independent lookups, several times faster than the bytewise loop and still portable.
#include "crc32c.h"

#include <array>
#include <cstring>

namespace ptscope::format {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli, bit-reversed

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
    t[0][i] = crc;
  }
  // t[k][i] = CRC of byte i followed by k zero bytes.
  for (uint32_t i = 0; i < 256; ++i) {
    for (int k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  }
  return t;
}

constexpr Tables kTables = MakeTables();

}  // namespace

uint32_t Crc32cExtendSoftware(uint32_t crc, const uint8_t* data, size_t size) {
  crc = ~crc;
  while (size >= 8) {
    // Assemble little-endian words bytewise: no alignment or endianness assumptions.
    uint32_t lo = (uint32_t{data[0]} | uint32_t{data[1]} << 8 | uint32_t{data[2]} << 16 |
                   uint32_t{data[3]} << 24) ^ crc;
    uint32_t hi = uint32_t{data[4]} | uint32_t{data[5]} << 8 | uint32_t{data[6]} << 16 |
                  uint32_t{data[7]} << 24;
    crc = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
          kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
          kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    data += 8;
    size -= 8;
  }
  while (size-- > 0) crc = (crc >> 8) ^ kTables[0][(crc ^ *data++) & 0xFF];
  return ~crc;
}

#if defined(__x86_64__)
namespace {

// The crc32 instruction computes exactly CRC32C; 8 bytes per instruction.
__attribute__((target("sse4.2"))) uint32_t Crc32cExtendSse42(uint32_t crc, const uint8_t* data,
                                                             size_t size) {
  uint64_t c = ~crc;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);  // x86 is little-endian, as the instruction expects
    c = __builtin_ia32_crc32di(c, word);
    data += 8;
    size -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (size-- > 0) c32 = __builtin_ia32_crc32qi(c32, *data++);
  return ~c32;
}

// __builtin_cpu_init first: this initializer may run before libgcc's own CPU-model constructor.
// (A call from another static initializer that runs even earlier sees false: still correct.)
const bool kHaveSse42 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2") != 0;
}();

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const uint8_t* data, size_t size) {
  return kHaveSse42 ? Crc32cExtendSse42(crc, data, size) : Crc32cExtendSoftware(crc, data, size);
}
#else
uint32_t Crc32cExtend(uint32_t crc, const uint8_t* data, size_t size) {
  return Crc32cExtendSoftware(crc, data, size);
}
#endif

}  // namespace ptscope::format
