// libFuzzer target: the .ptar reader (format/FORMAT.md) on arbitrary bytes. Every chunk is read
// sequentially (with resync past damage), read again by its offset, and the whole archive is
// collected as the tools collect it (with its time conversion checked). A second reader skips the
// PT and blob bytes, as pt-decode's first pass does (of a compressed PtData payload only the
// fields are decompressed): it must copy none of them out, and find the same chunks when the
// first reader found no damage.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "ptscope/format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptscope::format;
  std::vector<uint8_t> bytes(data, data + size);
  auto reader = ArchiveReader::FromBytes(bytes, "fuzz.ptar");
  std::vector<uint64_t> offsets;
  if (reader) {
    while (std::optional<Chunk> chunk = (*reader)->Next()) {
      offsets.push_back((*reader)->last_location().offset);
    }
    for (uint64_t offset : offsets) (void)(*reader)->ReadChunkAt(offset);
    for (const Damage& damage : (*reader)->damage()) {
      // The ranges are in file order, within the file, and reading went on after each.
      if (damage.offset >= damage.end || damage.end > size) __builtin_trap();
    }
    (void)DescribeDamage((*reader)->damage());
  }
  auto skipping = ArchiveReader::FromBytes(bytes, "fuzz.ptar");
  if (reader && skipping) {
    (*skipping)->SkipData(true, true);
    std::vector<uint64_t> skipped_offsets;
    while (std::optional<Chunk> chunk = (*skipping)->Next()) {
      const auto* pt = std::get_if<PtDataChunk>(&*chunk);
      const auto* blob = std::get_if<BlobChunk>(&*chunk);
      if ((pt != nullptr && !pt->data.empty()) || (blob != nullptr && !blob->data.empty())) {
        __builtin_trap();  // skipped bytes are never copied out
      }
      skipped_offsets.push_back((*skipping)->last_location().offset);
    }
    // Without damage, the same chunks. (With it, a PtData payload that does not decompress
    // whole is damage only to the first reader, which then skips End's chunk count check.)
    if ((*reader)->damage().empty() && skipped_offsets != offsets) __builtin_trap();
    for (uint64_t offset : skipped_offsets) (void)(*skipping)->ReadChunkAt(offset);
  }
  (void)ReadArchiveFromBytes(std::move(bytes), "fuzz.ptar");
  return 0;
}
