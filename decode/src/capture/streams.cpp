// Stream collection (see streams.h).
#include "capture/streams.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>

namespace ptscope::decode {

std::string StreamName(const Stream& stream) {
  return stream.cpu >= 0 ? "cpu " + std::to_string(stream.cpu)
                         : "thread " + std::to_string(stream.key.tid);
}

void PieceBytes::Free::operator()(uint8_t* p) const { std::free(p); }

// The buffer grows with realloc as the chunks are copied in, so at most the joined bytes plus
// the growth step are held beyond the chunks not yet copied (never all of them twice, as when the
// whole buffer is allocated first). Large blocks grow by mremap, without copying; the 1.5x steps
// keep the copying linear when realloc has to move a smaller block.
PieceBytes PieceBytes::Join(const std::vector<std::vector<uint8_t>*>& chunks) {
  PieceBytes out;
  if (chunks.size() == 1) {
    out.whole_ = std::move(*chunks.front());
    out.size_ = out.whole_.size();
    return out;
  }
  size_t total = 0;
  for (const std::vector<uint8_t>* chunk : chunks) total += chunk->size();
  size_t capacity = 0;
  for (std::vector<uint8_t>* chunk : chunks) {
    std::vector<uint8_t> taken = std::move(*chunk);  // freed at the end of this iteration
    if (taken.empty()) continue;
    size_t needed = out.size_ + taken.size();
    if (needed > capacity) {
      capacity = std::min(total, std::max(needed, capacity + capacity / 2));
      void* grown = std::realloc(out.joined_.get(), capacity);
      if (grown == nullptr) throw std::bad_alloc();
      (void)out.joined_.release();
      out.joined_.reset(static_cast<uint8_t*>(grown));
    }
    std::memcpy(out.joined_.get() + out.size_, taken.data(), taken.size());
    out.size_ = needed;
  }
  return out;
}

// ", in the archive's damaged range [a, b)" when a range the archive reader skipped lies between
// file offsets `from` and `to` (the chunks of two pieces), else "".
std::string DamageBetween(const format::Archive& archive, uint64_t from, uint64_t to) {
  for (const format::Damage& d : archive.damage) {
    if (d.end != 0 && d.offset >= from && d.offset < to) {
      char range[96];
      std::snprintf(range, sizeof range, " (in the archive's damaged range [0x%llx, 0x%llx))",
                    static_cast<unsigned long long>(d.offset),
                    static_cast<unsigned long long>(d.end));
      return range;
    }
  }
  return {};
}

// perf pads each AUXTRACE record's trace bytes to 8 (PERF_ALIGN): such pieces overlap the next
// by less than this, and the padding (PAD packets) stays.
constexpr uint64_t kPerfAuxtraceAlign = 8;

// Groups PT pieces by stream, in stream_offset order, cut wherever data was lost; where
// snapshots overlap, each byte is taken once.
std::vector<Stream> CollectStreams(format::Archive& archive, const SidebandTimeline& timeline) {
  // The archive was read without its PT bytes (format::ReadOptions::keep_pt_bytes = false): every
  // piece refers to its chunks, read again where they are decoded. Else every piece holds its
  // bytes. (One way per archive: an empty chunk must not look like one read by reference.)
  const bool by_reference =
      !archive.pt_data.empty() && archive.pt_refs.size() == archive.pt_data.size() &&
      std::all_of(archive.pt_data.begin(), archive.pt_data.end(),
                  [](const format::PtDataChunk& chunk) { return chunk.data.empty(); }) &&
      std::any_of(archive.pt_refs.begin(), archive.pt_refs.end(),
                  [](const format::Archive::PtDataRef& ref) { return ref.size != 0; });
  std::map<uint32_t, std::vector<format::PtDataChunk*>> by_stream;
  for (format::PtDataChunk& piece : archive.pt_data) by_stream[piece.stream_id].push_back(&piece);
  std::vector<Stream> streams;
  for (auto& [stream_id, pieces] : by_stream) {
    std::stable_sort(pieces.begin(), pieces.end(), [](const auto* a, const auto* b) {
      return a->stream_offset < b->stream_offset;
    });
    Stream stream;
    if (pieces.front()->cpu >= 0 && pieces.front()->tid == 0) {
      stream.cpu = pieces.front()->cpu;
    } else {
      stream.key.tid = pieces.front()->tid;
      stream.key.pid = pieces.front()->pid != 0 ? pieces.front()->pid
                                                : timeline.PidOf(pieces.front()->tid);
      if (stream.key.pid == 0) stream.key.pid = stream.key.tid;
    }
    const format::PtDataChunk* previous = nullptr;
    uint64_t end = 0;  // stream offset just past the last byte taken
    uint64_t previous_chunk_at = 0;
    std::vector<std::vector<uint8_t>*> joined;  // the chunks of stream.pieces.back()
    auto close_piece = [&] {
      if (!stream.pieces.empty() && stream.pieces.back().in_memory()) {
        stream.pieces.back().bytes = PieceBytes::Join(joined);
      }
      joined.clear();
    };
    for (format::PtDataChunk* piece : pieces) {
      const size_t index = static_cast<size_t>(piece - archive.pt_data.data());
      const uint64_t size = by_reference ? archive.pt_refs[index].size : piece->data.size();
      uint64_t skip = 0;  // leading bytes that an earlier piece holds
      std::string loss;
      // File offsets between the previous piece's chunk and this one's: a damaged range there
      // (the archive reader skipped it) may have held pieces of this stream.
      const uint64_t chunk_at =
          index < archive.pt_refs.size() ? archive.pt_refs[index].chunk_offset : 0;
      const std::string damage = DamageBetween(archive, previous_chunk_at, chunk_at);
      if (previous != nullptr) {
        const bool lost = piece->bytes_lost_before != 0 || piece->stream_offset > end ||
                          (previous->flags & format::kPtTruncated) != 0;
        const bool next_snapshot = piece->snapshot_index != previous->snapshot_index;
        const uint64_t overlap = piece->stream_offset < end ? end - piece->stream_offset : 0;
        if (!lost && next_snapshot && overlap >= kPerfAuxtraceAlign &&
            (piece->flags & format::kPtSnapshot) != 0) {
          // The snapshot reaches back into bytes taken already: a ring copied whole again
          // (pt-emulate's snapshots, each decodable alone; pt-record's before it copied only
          // what was new) holds what the previous snapshot held. Each byte is decoded once, and
          // the overlap shows the two are one stream, so the rest continues the piece. (Less
          // than 8 bytes is perf's padding of an AUXTRACE record, joined as before: PAD packets.)
          skip = std::min(overlap, size);
        } else if (next_snapshot &&
                   (lost || overlap != 0 || (piece->flags & format::kPtOverwritten) != 0)) {
          // A ring that went round since the previous snapshot (overwritten, not reaching back
          // into it) lost what was overwritten.
          loss = "snapshot " + std::to_string(piece->snapshot_index) +
                 " begins: execution between snapshots was not captured";
        } else if (lost) {
          const uint64_t bytes_lost = piece->bytes_lost_before != 0 ? piece->bytes_lost_before
                                      : piece->stream_offset > end  ? piece->stream_offset - end
                                                                    : 0;
          loss = std::to_string(bytes_lost) + " bytes of trace lost before stream offset " +
                 std::to_string(piece->stream_offset) + damage;
        }
        // Else the piece continues the previous one byte for byte (a snapshot that copied only
        // what was new since the last one, as pt-record does): one piece, as perf decodes them.
      } else if (piece->bytes_lost_before != 0) {
        loss = std::to_string(piece->bytes_lost_before) + " bytes of trace lost before the start";
      } else if (!damage.empty() && piece->stream_offset != 0 &&
                 (piece->flags & format::kPtSnapshot) == 0) {
        // Its first pieces were in the damaged range: the stream starts late.
        loss = std::to_string(piece->stream_offset) + " bytes of trace lost before the start" +
               damage;
      }
      if (stream.pieces.empty() || !loss.empty()) {
        close_piece();
        stream.pieces.push_back(Piece{});
        stream.pieces.back().loss_before = loss;
      }
      Piece& current = stream.pieces.back();
      const uint64_t taken = size - skip;
      if (by_reference) {
        const format::Archive::PtDataRef& ref = archive.pt_refs[index];
        // Raw bytes (a perf.data AUXTRACE record, as large as perf's AUX buffer) are read in
        // pieces of at most kRawChunkBytes, which is what a PieceReader then holds.
        const uint64_t step = ref.raw ? Piece::kRawChunkBytes : std::max<uint64_t>(taken, 1);
        for (uint64_t done = 0; done < taken; done += step) {
          current.chunks.push_back(Piece::ChunkRef{
              current.size + done, std::min(step, taken - done),
              ref.chunk_offset + (ref.raw ? skip + done : 0), ref.raw, ref.raw ? 0 : skip});
        }
      } else {
        piece->data.erase(piece->data.begin(),
                          piece->data.begin() + static_cast<std::ptrdiff_t>(skip));
        joined.push_back(&piece->data);
      }
      current.size += taken;
      previous = piece;
      end = std::max(end, piece->stream_offset + size);
      previous_chunk_at = chunk_at;
    }
    close_piece();
    streams.push_back(std::move(stream));
  }
  std::sort(streams.begin(), streams.end(), [](const Stream& a, const Stream& b) {
    if (a.cpu != b.cpu) return a.cpu < b.cpu;  // per-thread streams (cpu -1) first
    return a.key.tid != b.key.tid ? a.key.tid < b.key.tid : a.key.pid < b.key.pid;
  });
  return streams;
}

bool Selected(const std::vector<uint32_t>& threads, const ThreadKey& key) {
  if (threads.empty()) return true;
  return std::find(threads.begin(), threads.end(), key.tid) != threads.end() ||
         std::find(threads.begin(), threads.end(), key.pid) != threads.end();
}

std::vector<TriggerMark> TriggersOf(const format::Archive& archive, const DecoderSetup& setup,
                                    uint32_t tid) {
  std::vector<TriggerMark> triggers;
  for (const format::MarkerChunk& marker : archive.markers) {
    if (marker.kind != format::MarkerKind::kTrigger) continue;
    if (marker.tid != 0 && marker.tid != tid) continue;
    triggers.push_back(
        TriggerMark{setup.time.ToNs(marker.tsc), marker.value, "trigger: " + marker.text});
  }
  std::stable_sort(triggers.begin(), triggers.end(),
                   [](const TriggerMark& a, const TriggerMark& b) { return a.time_ns < b.time_ns; });
  return triggers;
}

}  // namespace ptscope::decode
