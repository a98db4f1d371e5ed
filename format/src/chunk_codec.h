// Encoding of each chunk type's payload (the bytes before optional lz4 compression).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ptscope/format.h"

namespace ptscope::format {

bool IsKnownChunkType(uint16_t type);
// Appends the payload of `chunk` to `out`.
void EncodePayload(const Chunk& chunk, std::vector<uint8_t>& out);
// What DecodePayload does with the bulk `data` of PtData and Blob chunks: copied into the chunk,
// or only checked to fit (the chunk's `data` left empty) and its length put in `*data_size`.
struct DataHandling {
  bool skip_pt = false, skip_blob = false;
  uint64_t* data_size = nullptr;  // set for PtData and Blob chunks, skipped or not
};
// A PtData payload's fields before its bytes (stream_id ... bytes_lost_before, and the data's
// u64 length): all that DecodePayload reads of it with skip_pt.
inline constexpr uint64_t kPtDataFieldBytes = 56;
// Decodes a raw (decompressed) payload. Bytes after the fields this version knows are ignored
// (newer minor versions append fields). The error message names the field and its payload offset.
Result<Chunk> DecodePayload(ChunkType type, std::span<const uint8_t> payload,
                            const DataHandling& data = {});

}  // namespace ptscope::format
