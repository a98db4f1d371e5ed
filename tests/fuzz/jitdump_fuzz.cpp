// libFuzzer target: the jitdump reader and the JIT code store built from it (time mapping, MOVE
// chains, lookups by address and time).
#include <cstddef>
#include <cstdint>

#include "jit_code_store.h"
#include "jitdump_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptscope::symbols;
  auto dump = ParseJitdump(data, size, "jit-fuzz.dump");
  if (!dump) return 0;
  // The time map's pairs and conversion come from the input's first record times, so that
  // extreme values reach the interpolation.
  JitTimeMap time;
  if (!dump->records.empty()) {
    const JitCodeRecord& first = dump->records.front();
    time.SetConversion(static_cast<uint16_t>(first.timestamp & 63),
                       static_cast<uint32_t>(first.timestamp >> 32), first.code_addr);
    time.AddPair(first.code_addr, first.timestamp);
    time.AddPair(first.code_size, first.old_code_addr);
  }
  JitCodeStore store;
  store.AddJitdump(dump->pid, *dump, time);
  uint8_t buffer[16];
  for (const JitCodeRecord& record : dump->records) {
    for (uint64_t at : {record.code_addr, record.code_addr + record.code_size / 2,
                        record.old_code_addr}) {
      (void)store.Name(dump->pid, at, time.TscToNs(record.timestamp));
      (void)store.ReadCode(dump->pid, at, record.timestamp, buffer, sizeof buffer);
    }
  }
  return 0;
}
