// libFuzzer target: the /tmp/perf-PID.map reader and lookups in what it read.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "jit_code_store.h"
#include "perf_map_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptscope::symbols;
  PerfMap map = ParsePerfMap(std::string_view(reinterpret_cast<const char*>(data), size),
                             "/tmp/perf-1.map");
  JitCodeStore store;
  store.AddPerfMap(1, map);
  for (const PerfMapEntry& entry : map.entries) {
    (void)store.Name(1, entry.start, 0);
    (void)store.Name(1, entry.start + entry.size - 1, 0);
    (void)store.Name(1, entry.start + entry.size, 0);
  }
  return 0;
}
