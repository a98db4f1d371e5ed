// Sample chunks of every type, shared by the format unit tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ptscope/format.h"

namespace ptscope::format::testing {

// Deterministic, poorly compressible bytes (xorshift).
inline std::vector<uint8_t> NoiseBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  uint64_t x = seed | 1;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return out;
}

// Highly compressible bytes that look like repeated PT packets.
inline std::vector<uint8_t> RepetitiveBytes(size_t n) {
  static const uint8_t kPattern[] = {0x02, 0x82, 0x02, 0x82, 0x4d, 0x10, 0x20, 0x30, 0x0d, 0x9c};
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = kPattern[i % sizeof kPattern];
  return out;
}

inline std::vector<Chunk> EveryChunkType() {
  std::vector<Chunk> chunks;
  chunks.push_back(MetadataChunk{{{"tool", "pt-emulate"}, {"cpu.vendor", "GenuineIntel"},
                                  {"pt.mtc_period", "3"}}});
  PtDataChunk pt;
  pt.stream_id = 7;
  pt.cpu = -1;
  pt.pid = 1234;
  pt.tid = 1235;
  pt.stream_offset = 4096;
  pt.reference_tsc = 0x1122334455667788ull;
  pt.flags = kPtTruncated | kPtSnapshot;
  pt.bytes_lost_before = 512;
  pt.snapshot_index = 3;
  pt.data = RepetitiveBytes(3000);
  chunks.push_back(pt);
  SidebandAttrChunk attr;
  attr.attr_id = 1;
  attr.sample_type = 0x10086;
  attr.read_format = 4;
  attr.sample_id_all = true;
  attr.ids = {100, 101, 0xffffffffffffffffull};
  attr.raw_attr = NoiseBytes(136, 5);
  chunks.push_back(attr);
  chunks.push_back(SidebandChunk{1, 2, NoiseBytes(72, 9)});
  chunks.push_back(ModuleChunk{"/usr/lib/libc.so.6", {0xde, 0xad, 0xbe, 0xef}, 1 << 20,
                               -5, true});
  BlobChunk blob;
  blob.kind = BlobKind::kVdso;
  blob.name = "vdso64";
  blob.pid = 1234;
  blob.vaddr = 0x7fff0000;
  blob.build_id = {1, 2, 3};
  blob.data = NoiseBytes(100, 11);
  chunks.push_back(blob);
  chunks.push_back(MarkerChunk{MarkerKind::kTrigger, 99, 1234, 1235, 1, 0x401000, "main"});
  chunks.push_back(TimeSyncChunk{1, {{10, 20}, {30, 40}}});
  return chunks;
}

}  // namespace ptscope::format::testing
