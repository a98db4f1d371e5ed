// libFuzzer target: the kernel's perf_event records as the archive's Sideband chunks hold them
// (format/include/ptscope/perf_records.h). The first byte chooses the sample_id layout; the
// records are iterated to the first malformed one, and each is built back into bytes.
#include <cstddef>
#include <cstdint>
#include <span>

#include "ptscope/perf_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptscope::perf;
  if (size == 0) return 0;
  RecordLayout layout;
  const uint8_t choice = data[0];
  layout.sample_id_all = (choice & 1) != 0;
  layout.sample_type = 0;
  if (choice & 2) layout.sample_type |= kSampleTid;
  if (choice & 4) layout.sample_type |= kSampleTime;
  if (choice & 8) layout.sample_type |= kSampleIdentifier;
  if (choice & 16) layout.sample_type |= kSampleCpu;
  if (choice & 32) layout.sample_type |= kSampleId;
  if (choice & 64) layout.sample_type |= kSampleStreamId;
  RecordIterator records(std::span<const uint8_t>(data + 1, size - 1), layout);
  while (std::optional<ptscope::Result<Record>> record = records.Next()) {
    if (!*record) break;
    (void)BuildRecord(**record, layout);
  }
  return 0;
}
