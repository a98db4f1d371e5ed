// libFuzzer target: pt-decode's whole pipeline (sideband timeline, PSB units, QueryWalker or
// libipt, stack tracking, the text sink) on a capture whose PT bytes and sideband records are
// the input, around a fixed program: the Metadata, Module and Blob chunks (the program embedded)
// of decode_base.ptar, a pt-emulate capture of tests/programs/calls.c.
//
// Input: u32 (little-endian) PT length N, N bytes of PT for the program's one thread, then raw
// perf_event records for the Sideband chunk (the base archive's record layout). Every fourth
// input (by its last byte) is decoded by libipt's block decoder instead of the walker.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ptscope/decode.h"
#include "ptscope/format.h"

namespace {

ptscope::format::Archive* base = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto archive = ptscope::format::ReadArchive(PTSCOPE_FUZZ_DECODE_BASE);
  if (!archive || archive->pt_data.empty() || archive->sideband.empty()) {
    std::fprintf(stderr, "decode_fuzz: %s: not a usable base capture (%s)\n",
                 PTSCOPE_FUZZ_DECODE_BASE,
                 archive ? "it needs PT data and sideband" : archive.error().message.c_str());
    std::abort();
  }
  base = new ptscope::format::Archive(std::move(*archive));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptscope;
  if (size < 4) return 0;
  size_t pt_size = data[0] | data[1] << 8 | data[2] << 16 | size_t{data[3]} << 24;
  if (pt_size > size - 4) pt_size = size - 4;
  format::Archive archive = *base;
  format::PtDataChunk piece = base->pt_data.front();
  piece.stream_offset = 0;
  piece.data.assign(data + 4, data + 4 + pt_size);
  archive.pt_data = {std::move(piece)};
  archive.pt_refs.clear();
  format::SidebandChunk sideband = base->sideband.front();
  sideband.records.assign(data + 4 + pt_size, data + size);
  archive.sideband = {std::move(sideband)};
  decode::PipelineOptions options;
  options.format = decode::OutputFormat::kText;
  options.output_path = "/dev/null";
  options.walker = size == 0 || data[size - 1] % 4 != 0;
  (void)decode::RunPipeline(archive, options);
  return 0;
}
