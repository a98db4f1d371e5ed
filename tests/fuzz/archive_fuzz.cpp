// libFuzzer target: the .ptar reader (format/FORMAT.md) on arbitrary bytes. Every chunk is read
// sequentially (with resync past damage), read again by its offset, and the whole archive is
// collected as the tools collect it (with its time conversion checked).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ptscope/format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptscope::format;
  std::vector<uint8_t> bytes(data, data + size);
  auto reader = ArchiveReader::FromBytes(bytes, "fuzz.ptar");
  if (reader) {
    std::vector<uint64_t> offsets;
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
  (void)ReadArchiveFromBytes(std::move(bytes), "fuzz.ptar");
  return 0;
}
