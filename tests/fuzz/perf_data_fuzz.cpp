// libFuzzer target: the perf.data reader (format/PERF_DATA.md), then the export of what it read
// back to perf.data (the path that divided by a truncated time_mult).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ptscope/perf_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptscope::format;
  auto archive = ImportPerfDataFromBytes(std::vector<uint8_t>(data, data + size), "fuzz.data");
  if (archive) (void)ExportPerfDataToBytes(*archive);
  return 0;
}
