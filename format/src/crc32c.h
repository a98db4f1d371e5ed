// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI/ext4/btrfs.
// Software slicing-by-8 or SSE4.2; the archive checksums every chunk header and payload with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ptscope::format {

// Continues a CRC: Crc32c(b) == Crc32cExtend(0, b); Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
// Uses the SSE4.2 crc32 instruction when the CPU has it, else the table-driven version.
uint32_t Crc32cExtend(uint32_t crc, const uint8_t* data, size_t size);
// The portable table-driven implementation (tests compare the two).
uint32_t Crc32cExtendSoftware(uint32_t crc, const uint8_t* data, size_t size);
inline uint32_t Crc32c(std::span<const uint8_t> bytes) {
  return Crc32cExtend(0, bytes.data(), bytes.size());
}

}  // namespace ptscope::format
