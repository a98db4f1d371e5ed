// PerfettoSink: streams Perfetto TrackEvent protobuf (layout in perfetto_trace.proto) to a file,
// gzip-compressed when the path ends in .gz. Packets are encoded by hand into reusable buffers and
// written as they are produced, so memory grows with the number of threads and distinct frames,
// not with the output. Thread-safe: calls from several trackers are serialised by a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "events.h"
#include "sink/frame_name_cache.h"
#include "sink/output_file.h"
#include "sink/proto_writer.h"
#include "flat_map.h"

namespace ptscope::decode {

class PerfettoSink : public SliceSink {
 public:
  PerfettoSink(std::unique_ptr<OutputFile> out, FrameNamer& namer);

  void BeginThread(const ThreadKey& thread, const std::string& process_name,
                   const std::string& thread_name) override;
  void Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
             bool inferred) override;
  void End(const ThreadKey& thread, uint64_t time_ns) override;
  void Instant(const ThreadKey& thread, uint64_t time_ns, const std::string& text) override;
  void WriteRecords(const ThreadKey& thread, const SliceRecord* records, size_t count) override;
  void Finish() override;
  std::string OutputError() const override { return error_; }

 private:
  struct FrameIdHash {
    uint64_t operator()(const FrameId& f) const {
      return (f.address ^ (uint64_t{f.inline_index} << 40) ^ (uint64_t(f.kind) << 58)) *
             0x9e3779b97f4a7c15ull;
    }
  };
  // Where a frame's begin-packet tail (see WriteTail) lives in ThreadState::field_bytes; the
  // frame's own TrackEvent fields (name_iid and debug annotations) are its last fields_size bytes.
  struct FieldSpan {
    uint32_t offset = 0;
    uint32_t size = 0;
    uint32_t fields_size = 0;
  };
  // 32: WriteTail copies the first 32 bytes of every tail unconditionally (most are shorter).
  static constexpr size_t kTailPadding = 32;
  // Before every tail in field_bytes and end_tail: the packet's first bytes when its timestamp
  // delta takes one byte (most do: events nanoseconds apart), as WriteCommonRun writes them -
  // the Trace.packet tag, the packet's size, the timestamp's tag - and a byte for the delta.
  // Such a packet is then one block copy and one byte store, no varint to size or encode.
  static constexpr size_t kHeadSize = 4;
  static void PutHead(std::string& bytes, size_t tail_size);
  // Per thread: its track and its sequence's interning tables.
  struct ThreadState {
    ThreadKey key;
    uint64_t track_uuid = 0;
    uint32_t sequence_id = 0;
    bool sequence_started = false;
    uint64_t last_time = 0;
    uint32_t open_slices = 0;
    // Per distinct frame: the tail of its (non-inferred) begin packet, encoded once, after its
    // head (kHeadSize). field_bytes ends in kTailPadding bytes so that tails can be copied in
    // whole 16-byte blocks.
    FlatMap<FrameId, FieldSpan, FrameIdHash> frame_fields;
    std::string field_bytes = std::string(kTailPadding, '\0');
    std::string end_tail;  // the head and tail of every end packet, padded likewise
    size_t max_tail = 0;   // the longest tail in field_bytes or end_tail (without padding)
    uint64_t next_name_iid = 1, next_location_iid = 1;
    std::unordered_map<std::string, uint64_t> string_iids;
    // Encoded once: the TracePacket.trusted_packet_sequence_id field.
    ProtoBuffer sequence_field;
    // The sequence's delta-encoded clock: started (snapshot written), and its last value.
    bool clock_started = false;
    uint64_t clock_ns = 0;
  };

  ThreadState& StateFor(const ThreadKey& thread);
  ThreadState& CreateThread(const ThreadKey& thread, const std::string& process_name,
                            const std::string& thread_name);
  // Starts packet_ on the thread's sequence; the first packet of a sequence clears its state.
  void StartPacket(ThreadState& state, bool needs_interned, uint64_t time_ns, bool has_time);
  // time_ns as a delta on the sequence's clock (time_ns never goes back on a sequence); the first
  // call writes the sequence's clock snapshot.
  uint64_t ClockDelta(ThreadState& state, uint64_t time_ns);
  void WriteClockSnapshot(ThreadState& state, uint64_t time_ns);
  void WritePacket();
  uint64_t StringIid(ThreadState& state, const std::string& s);
  // Interns the frame's name and strings on the sequence and encodes its event fields.
  std::string EncodeFrameFields(ThreadState& state, const ResolvedFrame& frame);
  void BeginLocked(ThreadState& state, uint64_t time_ns, const FrameId& frame, bool inferred);
  // Out of line, so that BeginLocked's common case inlines into WriteRecords: an inferred begin,
  // or a frame not yet encoded on the sequence (`fields` null).
  void BeginRare(ThreadState& state, uint64_t time_ns, const FrameId& frame, bool inferred,
                 const FieldSpan* fields);
  void EndLocked(ThreadState& state, uint64_t time_ns);
  void InstantLocked(ThreadState& state, uint64_t time_ns, const std::string& text);
  // The common packets (a slice begin of a known frame, a slice end), encoded straight into
  // one buffer with their lengths computed up front: no nested-message copies.
  // A packet whose bytes after the timestamp (`tail`, followed by kTailPadding readable bytes)
  // were encoded once, in one block copy.
  void WriteTail(uint64_t delta_ns, const char* tail, size_t tail_size);
  // WriteTail's packet at `p` (room for kMaxTailPacketHead + tail_size + kTailPadding bytes);
  // returns its end.
  static char* PutTailPacket(char* p, uint64_t delta_ns, const char* tail, size_t tail_size);
  static constexpr size_t kMaxTailPacketHead = 1 + 10 + 1 + 10;
  // Writes records from `r` on for as long as each is a common packet (a non-inferred begin of a
  // frame encoded on the sequence, an end) on a started clock, straight into the output buffer
  // with the thread's state in locals; returns the first record it did not write.
  const SliceRecord* WriteCommonRun(ThreadState& state, const SliceRecord* r,
                                    const SliceRecord* end);
  // Writes `packet` framed as one Trace.packet.
  void WriteFramed(std::string_view packet);
  // The frame's fields, encoded (and interned) on first use, with its begin-packet tail.
  FieldSpan FieldsOf(ThreadState& state, const FrameId& frame, uint64_t time_ns);
  void WriteFastEnd(ThreadState& state, uint64_t time_ns);
  // The begin of an inferred slice whose frame is already encoded on the sequence.
  void WriteInferredBegin(ThreadState& state, uint64_t time_ns, FieldSpan fields);

  std::mutex mutex_;
  std::unique_ptr<OutputFile> out_;
  FrameNameCache names_;
  std::vector<std::unique_ptr<ThreadState>> threads_;  // in order of appearance
  std::unordered_map<uint64_t, ThreadState*> thread_index_;  // pid << 32 | tid
  std::unordered_map<uint32_t, uint64_t> process_uuids_;
  ThreadState* last_state_ = nullptr;  // states never move (unique_ptr)
  uint64_t next_uuid_ = 1;
  bool finished_ = false;
  std::string error_;

  // Reusable encoding buffers.
  ProtoBuffer packet_, event_, interned_, entry_, annotation_, descriptor_, frame_bytes_;
  ProtoBuffer inferred_field_;    // the "inferred: true" debug annotation, encoded once
};

}  // namespace ptscope::decode
