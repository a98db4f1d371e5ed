// Reading Intel PT bytes out of the perf AUX area, in both of perf's modes:
//  - full: the AUX area is mapped writable; the kernel stops (and flags TRUNCATED) rather than
//    overwrite, and we hand space back by advancing aux_tail;
//  - snapshot: mapped PROT_READ only, so the kernel overwrites the oldest data forever; on a
//    trigger the event is disabled and the ring's content is taken oldest-first.
// Everything works on a view of perf_event_mmap_page + buffer so the unit tests simulate the
// kernel with real PT bytes.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace ptscope::record {

struct AuxRingView {
  perf_event_mmap_page* page = nullptr;
  const uint8_t* aux = nullptr;  // aux_size bytes, a power of two
  uint64_t aux_size = 0;
};

// A piece of one PT stream, ready to become a PtDataChunk.
struct AuxPiece {
  uint64_t stream_offset = 0;
  uint32_t flags = 0;            // format::PtDataFlags
  uint64_t bytes_lost_before = 0;
  std::vector<uint8_t> data;
};

// Full mode: everything between aux_tail and aux_head, then aux_tail = aux_head.
class AuxStreamReader {
 public:
  std::optional<AuxPiece> Read(const AuxRingView& ring);
  // The kernel reported (PERF_RECORD_AUX flag TRUNCATED) that it dropped data: the next piece is
  // marked so decoders show a gap there.
  void NoteTruncated() { truncated_pending_ = true; }

 private:
  bool truncated_pending_ = false;
};

// Snapshot mode. In overwrite mode aux_head is the write position inside the buffer (perf's
// "head is an offset within the buffer" case); a head that is already >= the buffer size is
// treated as a running count. Whether the ring has wrapped is known from a head that moved
// backwards or from non-zero bytes at the end of the (zero-initialised) buffer.
class AuxSnapshotReader {
 public:
  // Call while the event is disabled. Returns the bytes new since the previous snapshot when
  // the ring has never wrapped, else the whole ring oldest-first (flag kPtOverwritten).
  // std::nullopt when nothing was written since the last snapshot.
  std::optional<AuxPiece> Take(const AuxRingView& ring);
  bool wrapped() const { return wrapped_; }

 private:
  bool wrapped_ = false;
  uint64_t last_offset_ = 0;     // head offset at the previous snapshot
  uint64_t stream_end_ = 0;      // stream_offset just past the last piece emitted
  bool have_previous_ = false;
};

// Bytes at the buffer's end that must be zero while the ring has not wrapped yet.
inline constexpr uint64_t kWrapProbeBytes = 256;

}  // namespace ptscope::record
