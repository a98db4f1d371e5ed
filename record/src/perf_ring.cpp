#include "perf_ring.h"

#include <algorithm>

namespace ptscope::record {

void CopyFromRing(const uint8_t* ring, uint64_t size, uint64_t position, uint64_t length,
                  std::vector<uint8_t>* out) {
  uint64_t start = position % size;
  uint64_t first = std::min(length, size - start);
  out->insert(out->end(), ring + start, ring + start + first);
  out->insert(out->end(), ring, ring + (length - first));
}

DrainStats DrainDataRing(const DataRingView& ring, std::vector<uint8_t>* out) {
  DrainStats stats;
  uint64_t head = LoadAcquire(&ring.page->data_head);
  uint64_t tail = ring.page->data_tail;  // only we write it
  if (head == tail) return stats;
  uint64_t available = head - tail;
  if (available > ring.data_size) {
    // Cannot happen with a writable (non-overwrite) ring; do not copy garbage.
    stats.overrun = true;
  } else {
    CopyFromRing(ring.data, ring.data_size, tail, available, out);
    stats.bytes = available;
  }
  StoreRelease(&ring.page->data_tail, head);
  return stats;
}

}  // namespace ptscope::record
