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
  bool truncated_pending() const { return truncated_pending_; }

 private:
  bool truncated_pending_ = false;
};

// Snapshot mode. In overwrite mode the kernel publishes aux_head only when the event stops
// (sched-out, disable), as the hardware's write offset inside the buffer (pt_event_stop(),
// arch/x86/events/intel/pt.c); a head already >= the buffer size is taken as a running count.
// Like perf (intel_pt_find_snapshot()), a snapshot copies only what is new since the previous
// one: it keeps the newest bytes of each snapshot (the reference) and compares them the next
// time; while they are unchanged and the head did not come round into them, the ring did not go
// round since, and only the bytes after the previous head are new. Otherwise the whole ring is
// new, and older data was overwritten. So no execution is copied (and decoded) twice.
class AuxSnapshotReader {
 public:
  // `reference_bytes`: how much of the ring's newest data to keep (perf: two PSB periods, at
  // most 256 KiB); at most half the ring is used.
  explicit AuxSnapshotReader(uint64_t reference_bytes = 32 * 1024)
      : reference_bytes_(reference_bytes) {}
  // Call while the event is disabled. std::nullopt when nothing was written since the last
  // snapshot.
  std::optional<AuxPiece> Take(const AuxRingView& ring);
  bool wrapped() const { return wrapped_; }

 private:
  std::optional<AuxPiece> TakeRunningCount(const AuxRingView& ring, uint64_t head);
  bool WentRound(const AuxRingView& ring, uint64_t offset) const;
  void KeepReference(const AuxRingView& ring, uint64_t offset);

  uint64_t reference_bytes_;
  bool have_previous_ = false;
  bool wrapped_ = false;          // the ring went round at least once
  uint64_t last_offset_ = 0;      // head offset at the previous snapshot
  uint64_t last_head_ = 0;        // raw head (running-count kernels)
  std::vector<uint8_t> reference_;  // the bytes before last_offset_ at the previous snapshot
  uint64_t stream_end_ = 0;       // stream_offset just past the last piece emitted
};

// Bytes at the end of a never-wrapped, zero-initialised buffer that must still be zero (perf's
// intel_pt_first_wrap() looks at the last 512 u64; the hardware pads with PAD packets, 0x00, so a
// shorter look can miss a wrap).
inline constexpr uint64_t kWrapProbeBytes = 4096;

}  // namespace ptscope::record
