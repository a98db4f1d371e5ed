// libFuzzer target: pt-decode's whole pipeline (sideband timeline, PSB units, QueryWalker or
// libipt, stack tracking, the text sink) on a capture whose PT bytes and sideband records are
// the input, around a fixed program: the Metadata, Module and Blob chunks (the program embedded)
// of decode_base.ptar, a pt-emulate capture of tests/programs/calls.c.
//
// Input: u32 (little-endian) PT length N, N bytes of PT for the program's one thread, then raw
// perf_event records for the Sideband chunk (the base archive's record layout).
//
// The program's modules are resolved and their symbols loaded once, in the initializer
// (decode::ResolvedModules), and kept for every input: resolving them per input (writing out the
// embedded binaries, inflating libc's compressed debug info) cost ~40 ms of CPU per input, so the
// target ran ~3 inputs/s under ASan; the per-input archive holds no blobs at all.
//
// Differential: each input is decoded twice, with QueryWalker and with libipt's block decoder
// (--libipt-blocks), and the two text outputs must be the same byte for byte, as README says they
// are (a difference is a finding, like a crash), except where libipt's block cache decides: a
// suppressed-IP TIP at an indirect branch (tests/decode/decode_differential.h states the rule and
// why; around it the two must still agree exactly).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "decode_differential.h"
#include "ptscope/decode.h"
#include "ptscope/format.h"

namespace {

ptscope::format::Archive* base = nullptr;       // decode_base.ptar as read (its blobs: resolved)
ptscope::format::Archive* skeleton = nullptr;   // the same without its blobs: copied per input
ptscope::decode::ResolvedModules* resolved = nullptr;
std::string* outputs = nullptr;  // a directory for the two outputs

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

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
  skeleton = new ptscope::format::Archive(*base);
  skeleton->blobs.clear();
  auto modules = ptscope::decode::ResolvedModules::ForArchive(*base, {});
  if (!modules) {
    std::fprintf(stderr, "decode_fuzz: %s: %s\n", PTSCOPE_FUZZ_DECODE_BASE,
                 modules.error().message.c_str());
    std::abort();
  }
  resolved = modules->release();
  // On tmpfs when there is one: each output is fdatasync'ed before its rename, which on a disk
  // costs more than the decode itself.
  char shm_dir[] = "/dev/shm/ptscope-decode-fuzz-XXXXXX";
  char tmp_dir[] = "/tmp/ptscope-decode-fuzz-XXXXXX";
  char* dir = ::mkdtemp(shm_dir);
  if (dir == nullptr) dir = ::mkdtemp(tmp_dir);
  if (dir == nullptr) std::abort();
  outputs = new std::string(dir);
  std::atexit([] {
    ::rmdir(outputs->c_str());  // each input's outputs are unlinked already
    delete resolved;            // which removes the directory its embedded binaries went to
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptscope;
  if (size < 4) return 0;
  size_t pt_size = data[0] | data[1] << 8 | data[2] << 16 | size_t{data[3]} << 24;
  if (pt_size > size - 4) pt_size = size - 4;
  format::Archive archive = *skeleton;
  archive.pt_refs.clear();
  format::SidebandChunk sideband = base->sideband.front();
  sideband.records.assign(data + 4 + pt_size, data + size);
  archive.sideband = {std::move(sideband)};
  // Decodes `pt` (as the thread's whole PT, from stream offset 0) with both decoders. Each
  // RunPipeline builds its own libipt image-section cache, so no block cache outlives a decode.
  auto decode_both = [&](std::span<const uint8_t> pt) {
    format::PtDataChunk piece = base->pt_data.front();
    piece.stream_offset = 0;
    piece.data.assign(pt.begin(), pt.end());
    decode::testing::DecodedPair both;
    for (int walker = 0; walker < 2; ++walker) {
      format::Archive copy = archive;
      copy.pt_data = {piece};
      decode::PipelineOptions options;
      options.format = decode::OutputFormat::kText;
      options.output_path = *outputs + (walker ? "/walker.txt" : "/libipt.txt");
      options.walker = walker != 0;
      options.resolved = resolved;
      auto summary = decode::RunPipeline(copy, options);
      decode::testing::DecodedText& out = walker ? both.walker : both.libipt;
      if (summary) out.instructions = summary->instructions;
      out.text = summary ? ReadAll(options.output_path) : "error: " + summary.error().message;
      ::unlink(options.output_path.c_str());
    }
    return both;
  };
  const std::string difference =
      decode::testing::CompareDecoders(std::span<const uint8_t>(data + 4, pt_size), decode_both);
  if (!difference.empty()) {
    std::fprintf(stderr, "decode_fuzz: %s", difference.c_str());
    std::abort();
  }
  return 0;
}
