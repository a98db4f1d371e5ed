// Writes a decode_fuzz input from a capture: u32 PT length, the PT bytes of the capture's first
// stream, then the records of its Sideband chunks (see decode_fuzz.cpp).
// Usage: make_decode_seed CAPTURE.ptar OUT
#include <cstdio>
#include <fstream>
#include <vector>

#include "ptscope/format.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_decode_seed CAPTURE.ptar OUT\n");
    return 2;
  }
  auto archive = ptscope::format::ReadArchive(argv[1]);
  if (!archive || archive->pt_data.empty()) {
    std::fprintf(stderr, "make_decode_seed: %s: %s\n", argv[1],
                 archive ? "no PT data" : archive.error().message.c_str());
    return 1;
  }
  std::vector<uint8_t> pt;
  for (const auto& piece : archive->pt_data) {
    if (piece.stream_id == archive->pt_data.front().stream_id) {
      pt.insert(pt.end(), piece.data.begin(), piece.data.end());
    }
  }
  std::vector<uint8_t> out = {static_cast<uint8_t>(pt.size()), static_cast<uint8_t>(pt.size() >> 8),
                              static_cast<uint8_t>(pt.size() >> 16),
                              static_cast<uint8_t>(pt.size() >> 24)};
  out.insert(out.end(), pt.begin(), pt.end());
  for (const auto& chunk : archive->sideband) {
    out.insert(out.end(), chunk.records.begin(), chunk.records.end());
  }
  std::ofstream(argv[2], std::ios::binary)
      .write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  return 0;
}
