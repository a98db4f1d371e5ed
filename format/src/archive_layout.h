// Byte layout constants of the .ptar file header and chunk header (format/FORMAT.md is normative;
// keep the two in step).
#pragma once

#include <cstdint>

namespace ptscope::format::layout {

// "PTAR\r\n\x1a\n": the CR LF / LF / ^Z bytes are altered by text-mode transfers (like PNG's).
inline constexpr uint8_t kFileMagic[8] = {'P', 'T', 'A', 'R', '\r', '\n', 0x1a, '\n'};

// File header.
inline constexpr uint64_t kHeaderMagic = 0;           // u8[8]
inline constexpr uint64_t kHeaderVersionMajor = 8;    // u16
inline constexpr uint64_t kHeaderVersionMinor = 10;   // u16
inline constexpr uint64_t kHeaderMinReaderMajor = 12; // u16
inline constexpr uint64_t kHeaderSizeField = 14;      // u16
inline constexpr uint64_t kHeaderFeatures = 16;       // u64
inline constexpr uint64_t kHeaderCreated = 24;        // u64
inline constexpr uint64_t kHeaderCrc = 32;            // u32, CRC32C of the header with this field 0
inline constexpr uint64_t kHeaderReserved = 36;       // u32, 0
inline constexpr uint64_t kFileHeaderSize = 40;       // what this version writes
inline constexpr uint64_t kMaxFileHeaderSize = 4096;  // what a reader accepts from newer minors

// Chunk header.
inline constexpr uint32_t kChunkSync = 0x4B435450;    // bytes "PTCK"
inline constexpr uint64_t kChunkSyncOff = 0;          // u32
inline constexpr uint64_t kChunkTypeOff = 4;          // u16
inline constexpr uint64_t kChunkFlagsOff = 6;         // u16
inline constexpr uint64_t kChunkStoredOff = 8;        // u64
inline constexpr uint64_t kChunkRawOff = 16;          // u64
inline constexpr uint64_t kChunkPayloadCrcOff = 24;   // u32
inline constexpr uint64_t kChunkHeaderCrcOff = 28;    // u32, CRC32C of bytes [0, 28)
inline constexpr uint64_t kChunkHeaderSize = 32;

inline constexpr uint16_t kChunkFlagLz4 = 1u << 0;
inline constexpr uint16_t kChunkKnownFlags = kChunkFlagLz4;

// No chunk may hold more than this many raw bytes: readers refuse larger sizes before allocating,
// writers refuse to produce them (split big PT buffers into several pieces).
inline constexpr uint64_t kMaxChunkRawSize = uint64_t{1} << 30;
// An LZ4 block never decompresses to more than this many times its size (each byte of a match
// length's extension adds at most 255 bytes of output).
inline constexpr uint64_t kLz4MaxRatio = 255;

inline constexpr uint64_t PaddedTo8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

}  // namespace ptscope::format::layout
