// The perf_event data ring (the records the kernel writes after the mmap page): a view that tests
// can point at a simulated page and buffer, and the drain that copies records out verbatim.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <vector>

namespace ptscope::record {

struct DataRingView {
  perf_event_mmap_page* page = nullptr;
  uint8_t* data = nullptr;  // data_size bytes (a power of two)
  uint64_t data_size = 0;
};

struct DrainStats {
  uint64_t bytes = 0;       // bytes of records copied
  bool overrun = false;     // head ran more than a ring ahead of tail (impossible unless corrupt)
};

// Appends the records between data_tail and data_head to *out, in order, handling the wrap, and
// hands the space back to the kernel (data_tail = data_head). Records are complete: the kernel
// publishes data_head only after whole records.
DrainStats DrainDataRing(const DataRingView& ring, std::vector<uint8_t>* out);

// Reads of the fields the kernel updates concurrently, with the ordering perf requires
// (acquire on the heads, release on the tails).
inline uint64_t LoadAcquire(const __u64* field) { return __atomic_load_n(field, __ATOMIC_ACQUIRE); }
inline void StoreRelease(__u64* field, uint64_t value) {
  __atomic_store_n(field, value, __ATOMIC_RELEASE);
}

// Copies `length` bytes starting at ring position `position` (taken modulo size) into *out.
void CopyFromRing(const uint8_t* ring, uint64_t size, uint64_t position, uint64_t length,
                  std::vector<uint8_t>* out);

}  // namespace ptscope::record
