// Where one thread's PT bytes go: in --full mode, pieces of ~1 MiB written as they fill (a killed
// emulator loses little); in snapshot mode, a PSB-aligned ring written on demand.
#pragma once

#include <cstdint>
#include <vector>

#include "capture_writer.h"
#include "pt_encoder_model.h"
#include "snapshot_ring.h"

namespace ptscope::emulate {

class StreamOutput : public PtPacketSink {
 public:
  // snapshot_size == 0 selects full mode.
  // cpu: -1 for a per-thread stream; a per-CPU stream has pid = tid = 0.
  StreamOutput(record::CaptureWriter* writer, uint32_t stream_id, uint32_t pid, uint32_t tid,
               uint64_t snapshot_size, int32_t cpu = -1);

  void Append(const uint8_t* bytes, size_t size) override;
  void MarkPsb() override;

  // Full mode: writes what is buffered (at the end, or before detaching).
  Status Flush(uint64_t reference_tsc);
  // Snapshot mode: writes the ring as snapshot `index` (the ring keeps going).
  Status WriteSnapshot(uint32_t index, uint64_t reference_tsc);
  // The first write error hit inside Append (which cannot return one), if any.
  const Status& deferred_status() const { return deferred_; }
  uint64_t total_bytes() const { return total_; }
  void set_reference_tsc(uint64_t tsc) { reference_tsc_ = tsc; }

 private:
  format::PtDataChunk MakeChunk(uint64_t offset, uint64_t reference_tsc) const;

  record::CaptureWriter* writer_;
  uint32_t stream_id_, pid_, tid_;
  int32_t cpu_;
  bool full_;
  record::SnapshotRing ring_;
  std::vector<uint8_t> pending_;  // full mode
  uint64_t pending_offset_ = 0;
  uint64_t total_ = 0;
  uint64_t reference_tsc_ = 0;
  Status deferred_;
};

}  // namespace ptscope::emulate
