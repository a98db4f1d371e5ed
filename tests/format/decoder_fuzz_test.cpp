// Deterministic mutation runs over the payload decoders and the perf record parser. The CRCs
// normally stop damaged bytes before they reach a decoder; these runs feed the decoders directly
// so that a missing bounds check shows up (the ASan/UBSan build of this file makes it fatal).
// Nothing here asserts exact output: the exact behaviour is pinned by the other tests; this one
// asserts only "returns, and reports an error or a value", over many inputs.
#include <doctest/doctest.h>

#include <algorithm>

#include "byte_io.h"
#include "chunk_codec.h"
#include "ptscope/perf_records.h"
#include "test_archives.h"

namespace ptscope::format {
namespace {

struct Rng {
  uint64_t x;
  uint64_t Next() {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  }
  size_t Below(size_t n) { return n ? static_cast<size_t>(Next() % n) : 0; }
};

// Flips bytes, overwrites length-like words with extreme values, or cuts the tail.
std::vector<uint8_t> Mutate(std::vector<uint8_t> bytes, Rng& rng) {
  if (bytes.empty()) return bytes;
  switch (rng.Below(4)) {
    case 0:
      for (int i = 0; i < 3; ++i) bytes[rng.Below(bytes.size())] ^= static_cast<uint8_t>(rng.Next());
      break;
    case 1: {
      size_t at = rng.Below(bytes.size());
      static const uint64_t kExtremes[] = {0, 1, 0x7fffffff, 0xffffffff, ~uint64_t{0},
                                           uint64_t{1} << 40};
      uint64_t v = kExtremes[rng.Below(std::size(kExtremes))];
      for (size_t i = 0; i < 8 && at + i < bytes.size(); ++i) bytes[at + i] = uint8_t(v >> (8 * i));
      break;
    }
    case 2:
      bytes.resize(rng.Below(bytes.size()));
      break;
    default:
      bytes[rng.Below(bytes.size())] = 0xff;
      bytes.resize(bytes.size() - std::min(bytes.size(), rng.Below(8)));
      break;
  }
  return bytes;
}

TEST_CASE("payload decoders survive mutated payloads of every chunk type") {
  Rng rng{0x9e3779b97f4a7c15ull};
  std::vector<Chunk> chunks = testing::EveryChunkType();
  chunks.push_back(EndChunk{3});
  uint64_t errors = 0, values = 0;
  for (const Chunk& chunk : chunks) {
    std::vector<uint8_t> payload;
    EncodePayload(chunk, payload);
    auto decoded = DecodePayload(TypeOf(chunk), payload);
    REQUIRE(decoded);  // the unmutated payload decodes
    for (int round = 0; round < 400; ++round) {
      std::vector<uint8_t> bad = Mutate(payload, rng);
      auto result = DecodePayload(TypeOf(chunk), bad);
      (result ? values : errors) += 1;
      if (!result) CHECK(result.error().code == Errc::kCorrupt);
    }
  }
  CHECK(errors > 0);
  CHECK(values > 0);
}

TEST_CASE("the perf record iterator survives mutated record streams") {
  Rng rng{0x243f6a8885a308d3ull};
  const perf::RecordLayout layout{0x10086, true};
  std::vector<uint8_t> stream;
  perf::Record comm;
  comm.body = perf::CommRecord{1, 2, "name", true};
  perf::Record mmap;
  perf::MmapRecord m;
  m.filename = "/lib/x.so";
  m.build_id = {1, 2, 3};
  mmap.body = m;
  perf::Record sw;
  sw.body = perf::SwitchRecord{true, false, true, 5, 6};
  for (const perf::Record* r : {&comm, &mmap, &sw}) {
    std::vector<uint8_t> b = perf::BuildRecord(*r, layout);
    stream.insert(stream.end(), b.begin(), b.end());
  }
  uint64_t records = 0, errors = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<uint8_t> bad = Mutate(stream, rng);
    perf::RecordIterator it(bad, layout);
    int guard = 0;
    while (auto next = it.Next()) {
      (*next ? records : errors) += 1;
      REQUIRE(++guard < 10000);  // every record advances by at least its 8-byte header
    }
  }
  CHECK(records > 0);
  CHECK(errors > 0);
}

}  // namespace
}  // namespace ptscope::format
