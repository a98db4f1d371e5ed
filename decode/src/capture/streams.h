// PT streams of an archive as the pipeline decodes them: per-thread or per-CPU, each a list of
// contiguous pieces (cut wherever data was lost) that are split into decode units at PSBs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "capture/decoder_setup.h"
#include "events.h"
#include "ptscope/format.h"
#include "capture/sideband_timeline.h"

namespace ptscope::decode {

// A piece's PT bytes, held once. A piece of one chunk keeps that chunk's vector; the chunks of a
// longer piece are joined into one buffer, each chunk freed as soon as it is copied in.
class PieceBytes {
 public:
  PieceBytes() = default;
  // Takes the bytes of `chunks`, in order, leaving each vector empty.
  static PieceBytes Join(const std::vector<std::vector<uint8_t>*>& chunks);

  const uint8_t* data() const { return joined_ ? joined_.get() : whole_.data(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::vector<uint8_t> whole_;             // a piece of one chunk
  std::unique_ptr<uint8_t, Free> joined_;  // a piece of several chunks
  size_t size_ = 0;
};

// A contiguous stretch of one stream's PT bytes. They are either held in memory (`bytes`: archives
// read whole) or, for an archive or perf.data on disk read with keep_pt_bytes = false, read again
// chunk by chunk as they are decoded (`chunks`; see PieceReader), so that memory does not grow
// with the capture.
struct Piece {
  static constexpr uint64_t kRawChunkBytes = 1u << 20;
  struct ChunkRef {
    uint64_t piece_offset = 0;  // of the chunk's first PT byte within the piece
    uint64_t size = 0;          // PT bytes in the chunk
    uint64_t chunk_offset = 0;  // file offset of the chunk (ArchiveReader::ReadChunkAt)
    bool raw = false;           // the file holds the bytes themselves there (perf.data)
    uint64_t skip = 0;          // leading PT bytes of the chunk an earlier piece holds (overlap)
  };
  PieceBytes bytes;
  std::vector<ChunkRef> chunks;  // in piece order; empty when `bytes` holds the piece
  size_t size = 0;               // PT bytes in the piece
  std::string loss_before;       // non-empty: data was lost before this piece
  bool has_psb = false;          // set once decoding finds a PSB in it (UnitPlanner)
  bool in_memory() const { return chunks.empty(); }
};

// A trigger marker of the archive (pt-record --trigger), shown as an instant on its thread.
struct TriggerMark {
  uint64_t time_ns = 0;
  uint64_t address = 0;
  std::string text;
};

// The archive's trigger markers for thread `tid` (or for every thread), in time order.
std::vector<TriggerMark> TriggersOf(const format::Archive& archive, const DecoderSetup& setup,
                                    uint32_t tid);

struct Stream {
  ThreadKey key;     // per-thread streams
  int32_t cpu = -1;  // >= 0: a per-CPU stream; threads come from the CPU's schedule
  std::vector<Piece> pieces;
  std::vector<TriggerMark> triggers;
};

// "cpu N" or "thread N", for messages.
std::string StreamName(const Stream& stream);

// Groups PT pieces by stream, in stream_offset order, cut wherever data was lost, each byte once
// where pieces overlap (snapshots copied whole); per-thread
// streams first, by tid. PT bytes the archive holds move into the pieces (archive.pt_data keeps
// every field but `data`, which is left empty); pieces of chunks read without their bytes
// (format::ReadOptions::keep_pt_bytes = false) refer to the chunks instead.
std::vector<Stream> CollectStreams(format::Archive& archive, const SidebandTimeline& timeline);

// --threads: whether `key`'s tid or pid is listed (an empty list selects every thread).
bool Selected(const std::vector<uint32_t>& threads, const ThreadKey& key);

}  // namespace ptscope::decode
