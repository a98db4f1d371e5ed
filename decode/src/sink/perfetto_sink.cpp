#include "sink/perfetto_sink.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace ptscope::decode {
namespace {
// Field numbers (perfetto_trace.proto).
namespace packet {
constexpr uint32_t kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11, kInternedData = 12,
                   kSequenceFlags = 13, kClockSnapshot = 6, kDefaults = 59,
                   kTrackDescriptor = 60, kFirstPacketOnSequence = 87;
constexpr uint32_t kSeqCleared = 1, kSeqNeeds = 2;
}  // namespace packet
namespace defaults {
constexpr uint32_t kTimestampClockId = 58, kTrackEventDefaults = 11, kTrackUuid = 11;
}  // namespace defaults
namespace clock {
constexpr uint32_t kClocks = 1, kClockId = 1, kTimestamp = 2, kIsIncremental = 3;
// Each sequence's own delta-encoded clock (ids 64-127 are sequence-scoped), tied to BOOTTIME, the
// clock trace processor shows, by one snapshot at the sequence's first timestamp.
constexpr uint64_t kSequenceClock = 64, kBoottime = 6;
}  // namespace clock
namespace track {
constexpr uint32_t kUuid = 1, kProcess = 3, kThread = 4, kParentUuid = 5;
constexpr uint32_t kPid = 1, kTid = 2, kProcessName = 6, kThreadName = 5;
}  // namespace track
namespace event {
constexpr uint32_t kType = 9, kNameIid = 10, kName = 23, kDebugAnnotations = 4,
                   kSourceLocationIid = 34;
constexpr uint64_t kSliceBegin = 1, kSliceEnd = 2, kInstant = 3;
}  // namespace event
namespace annotation {
constexpr uint32_t kNameIid = 1, kBool = 2, kUint = 3, kPointer = 7, kStringIid = 17;
}  // namespace annotation
namespace interned {
constexpr uint32_t kEventNames = 2, kAnnotationNames = 3, kSourceLocations = 4, kStringValues = 29;
constexpr uint32_t kIid = 1, kName = 2;
constexpr uint32_t kFileName = 2, kFunctionName = 3, kLineNumber = 4;  // SourceLocation
}  // namespace interned

// Debug annotation names, interned with fixed iids on every sequence's first packet.
enum AnnotationName : uint64_t { kModule = 1, kAddress, kInferred, kInlined };
constexpr const char* kAnnotationNames[] = {"", "module", "address", "inferred", "inlined"};

uint64_t ThreadIndexKey(const ThreadKey& t) { return (uint64_t{t.pid} << 32) | t.tid; }

}  // namespace

// The per-record members (StateFor, Begin/EndLocked, WriteFastEnd, WriteTail) are marked
// inline: in this -fPIC library an ordinary member function may be interposed, so the compiler
// would call it from WriteRecords instead of inlining it.

PerfettoSink::PerfettoSink(std::unique_ptr<OutputFile> out, FrameNamer& namer)
    : out_(std::move(out)), names_(namer) {
  annotation_.Varint(annotation::kNameIid, kInferred);
  annotation_.Varint(annotation::kBool, 1);
  inferred_field_.Message(event::kDebugAnnotations, annotation_);
}

void PerfettoSink::BeginThread(const ThreadKey& thread, const std::string& process_name,
                               const std::string& thread_name) {
  std::lock_guard lock(mutex_);
  if (thread_index_.count(ThreadIndexKey(thread)) != 0) return;  // tolerate repeats
  CreateThread(thread, process_name, thread_name);
}

inline PerfettoSink::ThreadState& PerfettoSink::StateFor(const ThreadKey& thread) {
  if (last_state_ != nullptr && last_state_->key == thread) return *last_state_;  // runs of calls
  auto it = thread_index_.find(ThreadIndexKey(thread));
  last_state_ = it != thread_index_.end() ? it->second : &CreateThread(thread, "", "");
  return *last_state_;
}

PerfettoSink::ThreadState& PerfettoSink::CreateThread(const ThreadKey& thread,
                                                      const std::string& process_name,
                                                      const std::string& thread_name) {
  threads_.push_back(std::make_unique<ThreadState>());
  ThreadState& state = *threads_.back();
  state.key = thread;
  state.sequence_id = static_cast<uint32_t>(threads_.size());
  thread_index_[ThreadIndexKey(thread)] = &state;

  auto [proc, new_process] = process_uuids_.try_emplace(thread.pid, 0);
  if (new_process) proc->second = next_uuid_++;
  state.track_uuid = next_uuid_++;
  state.sequence_field.Varint(packet::kSequenceId, state.sequence_id);
  if (new_process) {
    ProtoBuffer process;
    process.Varint(track::kPid, thread.pid);
    if (!process_name.empty()) process.Bytes(track::kProcessName, process_name);
    descriptor_.Clear();
    descriptor_.Varint(track::kUuid, proc->second);
    descriptor_.Message(track::kProcess, process);
    StartPacket(state, false, 0, false);
    packet_.Message(packet::kTrackDescriptor, descriptor_);
    WritePacket();
  }
  {  // what WriteTail writes after the timestamp of an end packet
    ProtoBuffer tail;
    tail.Append(state.sequence_field.view());
    tail.Varint(packet::kSequenceFlags, packet::kSeqNeeds);
    tail.PutVarint((packet::kTrackEvent << 3) | 2);
    tail.PutVarint(2);
    tail.Varint(event::kType, event::kSliceEnd);
    PutHead(state.end_tail, tail.size());
    state.end_tail += tail.view();
    state.end_tail.append(kTailPadding, '\0');
    state.max_tail = std::max(state.max_tail, tail.size());
  }
  ProtoBuffer thread_desc;
  thread_desc.Varint(track::kPid, thread.pid);
  thread_desc.Varint(track::kTid, thread.tid);
  if (!thread_name.empty()) thread_desc.Bytes(track::kThreadName, thread_name);
  descriptor_.Clear();
  descriptor_.Varint(track::kUuid, state.track_uuid);
  descriptor_.Varint(track::kParentUuid, proc->second);
  descriptor_.Message(track::kThread, thread_desc);
  StartPacket(state, false, 0, false);
  packet_.Message(packet::kTrackDescriptor, descriptor_);
  WritePacket();
  return state;
}

void PerfettoSink::StartPacket(ThreadState& state, bool needs_interned, uint64_t time_ns,
                               bool has_time) {
  // A timed packet depends on the sequence's clock (and its events on the default track).
  needs_interned = needs_interned || has_time;
  const uint64_t delta = has_time ? ClockDelta(state, time_ns) : 0;  // may write the snapshot
  packet_.Clear();
  if (has_time) packet_.Varint(packet::kTimestamp, delta);
  packet_.Varint(packet::kSequenceId, state.sequence_id);
  if (!state.sequence_started) {
    state.sequence_started = true;
    packet_.Varint(packet::kSequenceFlags,
                   packet::kSeqCleared | (needs_interned ? packet::kSeqNeeds : 0));
    packet_.Bool(packet::kFirstPacketOnSequence, true);
    // Timestamps are deltas on the sequence's clock; track events go to the thread's track.
    ProtoBuffer track_defaults, packet_defaults;
    track_defaults.Varint(defaults::kTrackUuid, state.track_uuid);
    packet_defaults.Varint(defaults::kTimestampClockId, clock::kSequenceClock);
    packet_defaults.Message(defaults::kTrackEventDefaults, track_defaults);
    packet_.Message(packet::kDefaults, packet_defaults);
    // The fixed debug annotation names, valid for the whole sequence.
    interned_.Clear();
    for (uint64_t iid = kModule; iid <= kInlined; ++iid) {
      entry_.Clear();
      entry_.Varint(interned::kIid, iid);
      entry_.Bytes(interned::kName, kAnnotationNames[iid]);
      interned_.Message(interned::kAnnotationNames, entry_);
    }
  } else if (needs_interned) {
    packet_.Varint(packet::kSequenceFlags, packet::kSeqNeeds);
  }
}

inline uint64_t PerfettoSink::ClockDelta(ThreadState& state, uint64_t time_ns) {
  if (!state.clock_started) WriteClockSnapshot(state, time_ns);
  const uint64_t delta = time_ns - state.clock_ns;  // callers never go back in time
  state.clock_ns = time_ns;
  return delta;
}

void PerfettoSink::WriteClockSnapshot(ThreadState& state, uint64_t time_ns) {
  // The snapshot ties the sequence clock to BOOTTIME at the sequence's first timestamp (trace
  // processor keeps one time series per snapshot's set of clocks, so the sequences' snapshots
  // need not be in time order). It has a packet of its own: a snapshot packet carries nothing
  // else that trace processor would read.
  state.clock_started = true;
  state.clock_ns = time_ns;
  ProtoBuffer snapshot, entry;
  entry.Varint(clock::kClockId, clock::kSequenceClock);
  entry.Varint(clock::kTimestamp, time_ns);
  entry.Bool(clock::kIsIncremental, true);
  snapshot.Message(clock::kClocks, entry);
  entry.Clear();
  entry.Varint(clock::kClockId, clock::kBoottime);
  entry.Varint(clock::kTimestamp, time_ns);
  snapshot.Message(clock::kClocks, entry);
  ProtoBuffer snapshot_packet;
  snapshot_packet.Append(state.sequence_field.view());
  snapshot_packet.Message(packet::kClockSnapshot, snapshot);
  WriteFramed(snapshot_packet.view());
}

void PerfettoSink::WritePacket() {
  if (!interned_.empty()) packet_.Message(packet::kInternedData, interned_);
  interned_.Clear();
  WriteFramed(packet_.view());
}

void PerfettoSink::WriteFramed(std::string_view packet) {
  frame_bytes_.Clear();
  frame_bytes_.PutVarint((1 << 3) | 2);  // Trace.packet = 1, length-delimited
  frame_bytes_.PutVarint(packet.size());
  out_->Write(frame_bytes_.view());
  out_->Write(packet);
}

uint64_t PerfettoSink::StringIid(ThreadState& state, const std::string& s) {
  auto [it, inserted] = state.string_iids.try_emplace(s, state.string_iids.size() + 1);
  if (inserted) {
    entry_.Clear();
    entry_.Varint(interned::kIid, it->second);
    entry_.Bytes(interned::kName, s);
    interned_.Message(interned::kStringValues, entry_);
  }
  return it->second;
}

std::string PerfettoSink::EncodeFrameFields(ThreadState& state, const ResolvedFrame& frame) {
  uint64_t name_iid = state.next_name_iid++;
  entry_.Clear();
  entry_.Varint(interned::kIid, name_iid);
  entry_.Bytes(interned::kName, *frame.name);
  interned_.Message(interned::kEventNames, entry_);
  ProtoBuffer fields;
  fields.Varint(event::kNameIid, name_iid);
  auto add = [&](uint64_t annotation_name, uint32_t value_field, uint64_t value) {
    annotation_.Clear();
    annotation_.Varint(annotation::kNameIid, annotation_name);
    annotation_.Varint(value_field, value);
    fields.Message(event::kDebugAnnotations, annotation_);
  };
  if (!frame.file->empty()) {
    // file:line as an interned SourceLocation (the UI's source.* args): a few bytes per slice
    // instead of two annotations. The file names the code, so module and address are left out.
    uint64_t location_iid = state.next_location_iid++;
    entry_.Clear();
    entry_.Varint(interned::kIid, location_iid);
    entry_.Bytes(interned::kFileName, *frame.file);
    entry_.Bytes(interned::kFunctionName, *frame.name);
    if (frame.line != 0) entry_.Varint(interned::kLineNumber, frame.line);
    interned_.Message(interned::kSourceLocations, entry_);
    fields.Varint(event::kSourceLocationIid, location_iid);
  } else {
    if (!frame.module->empty()) add(kModule, annotation::kStringIid, StringIid(state, *frame.module));
    if (frame.has_address) add(kAddress, annotation::kPointer, frame.address);
  }
  if (frame.inlined) add(kInlined, annotation::kBool, 1);
  return std::string(fields.view());
}

void PerfettoSink::Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
                         bool inferred) {
  std::lock_guard lock(mutex_);
  BeginLocked(StateFor(thread), time_ns, frame, inferred);
}

void PerfettoSink::WriteRecords(const ThreadKey& thread, const SliceRecord* records,
                                size_t count) {
  std::lock_guard lock(mutex_);
  ThreadState& state = StateFor(thread);
  const SliceRecord* const end = records + count;
  for (const SliceRecord* r = records; r != end; ++r) {
    r = WriteCommonRun(state, r, end);
    if (r == end) break;
    switch (r->type) {
      case SliceRecord::Type::kBegin: BeginLocked(state, r->time_ns, r->frame, r->inferred); break;
      case SliceRecord::Type::kEnd: EndLocked(state, r->time_ns); break;
      case SliceRecord::Type::kInstant: InstantLocked(state, r->time_ns, *r->text()); break;
    }
  }
}

const SliceRecord* PerfettoSink::WriteCommonRun(ThreadState& state, const SliceRecord* r,
                                                const SliceRecord* end) {
  // What BeginLocked + WriteTail and EndLocked + WriteFastEnd do for these records, with the
  // output position, times and open count in registers: stored once per run, not per record.
  if (!state.sequence_started || !state.clock_started) return r;
  const size_t room = kMaxTailPacketHead + state.max_tail + kTailPadding;  // per record
  // Runs of a bounded size keep the reservation a small part of the output buffer.
  const size_t per_run = std::max<size_t>(1, (size_t{32} << 10) / room);
  const char* const field_bytes = state.field_bytes.data();
  const char* const end_tail = state.end_tail.data() + kHeadSize;
  const size_t end_tail_size = state.end_tail.size() - kHeadSize - kTailPadding;
  // A one-byte delta and a packet size below 128 (every tail shorter than 126 bytes): the head
  // before the tail is the packet's.
  const uint64_t head_limit = state.max_tail < 126 ? 0x80 : 0;
  uint64_t last_time = state.last_time;
  uint64_t clock_ns = state.clock_ns;
  uint32_t open = state.open_slices;
  while (r != end) {
    const SliceRecord* const run_end = r + std::min<size_t>(per_run, end - r);
    char* p = out_->Extend(room * static_cast<size_t>(run_end - r));
    for (; r != run_end; ++r) {
      // Held-back records come from memory, not cache (perf annotate: most of this loop's
      // samples waited on the load of r->type): ask for them ahead. Past `end` is harmless.
      __builtin_prefetch(r + 24);
      const char* tail;
      size_t tail_size;
      if (r->type == SliceRecord::Type::kBegin) {
        if (r->inferred) break;
        const FieldSpan* fields = state.frame_fields.Find(r->frame);
        if (fields == nullptr) break;
        tail = field_bytes + fields->offset;
        tail_size = fields->size;
        ++open;
      } else if (r->type == SliceRecord::Type::kEnd) {
        if (open == 0) continue;  // never write an unmatched END
        tail = end_tail;
        tail_size = end_tail_size;
        --open;
      } else {
        break;
      }
      const uint64_t time_ns = std::max(r->time_ns, last_time);
      last_time = time_ns;
      const uint64_t delta_ns = time_ns - clock_ns;  // time never goes back
      clock_ns = time_ns;
      if (delta_ns < head_limit) [[likely]] {
        const char* const head = tail - kHeadSize;
        std::memcpy(p, head, 16);
        std::memcpy(p + 16, head + 16, 16);
        for (size_t i = 32; i < kHeadSize + tail_size; i += 16) std::memcpy(p + i, head + i, 16);
        p[kHeadSize - 1] = static_cast<char>(delta_ns);
        p += kHeadSize + tail_size;
      } else {
        p = PutTailPacket(p, delta_ns, tail, tail_size);
      }
    }
    out_->Commit(p);
    if (r != run_end) break;
  }
  state.last_time = last_time;
  state.clock_ns = clock_ns;
  state.open_slices = open;
  return r;
}

inline void PerfettoSink::BeginLocked(ThreadState& state, uint64_t time_ns,
                                      const FrameId& frame, bool inferred) {
  time_ns = std::max(time_ns, state.last_time);
  state.last_time = time_ns;
  ++state.open_slices;
  const FieldSpan* fields = state.sequence_started ? state.frame_fields.Find(frame) : nullptr;
  if (fields != nullptr && !inferred) [[likely]] {
    WriteTail(ClockDelta(state, time_ns), state.field_bytes.data() + fields->offset, fields->size);
    return;
  }
  BeginRare(state, time_ns, frame, inferred, fields);
}

void PerfettoSink::BeginRare(ThreadState& state, uint64_t time_ns, const FrameId& frame,
                             bool inferred, const FieldSpan* fields) {
  if (fields != nullptr) {  // an inferred begin of a frame already encoded on the sequence
    WriteInferredBegin(state, time_ns, *fields);
    return;
  }
  StartPacket(state, true, time_ns, true);  // interned_ is fresh (or holds annotation names)
  FieldSpan encoded = FieldsOf(state, frame, time_ns);
  event_.Clear();
  event_.Varint(event::kType, event::kSliceBegin);
  event_.Append(std::string_view(state.field_bytes)
                    .substr(encoded.offset + encoded.size - encoded.fields_size, encoded.fields_size));
  if (inferred) event_.Append(inferred_field_.view());
  packet_.Message(packet::kTrackEvent, event_);
  WritePacket();
}

PerfettoSink::FieldSpan PerfettoSink::FieldsOf(ThreadState& state, const FrameId& frame,
                                               uint64_t time_ns) {
  if (const FieldSpan* known = state.frame_fields.Find(frame)) return *known;
  std::string encoded = EncodeFrameFields(state, names_.Resolve(state.key.pid, frame, time_ns));
  // What WriteTail writes after the timestamp of a non-inferred begin packet.
  ProtoBuffer tail;
  tail.Append(state.sequence_field.view());
  tail.Varint(packet::kSequenceFlags, packet::kSeqNeeds);
  tail.PutVarint((packet::kTrackEvent << 3) | 2);
  tail.PutVarint(2 + encoded.size());
  tail.Varint(event::kType, event::kSliceBegin);
  tail.Append(encoded);
  state.field_bytes.resize(state.field_bytes.size() - kTailPadding);  // the tails stay padded
  PutHead(state.field_bytes, tail.size());
  FieldSpan fields{static_cast<uint32_t>(state.field_bytes.size()),
                   static_cast<uint32_t>(tail.size()), static_cast<uint32_t>(encoded.size())};
  state.field_bytes += tail.view();
  state.field_bytes.append(kTailPadding, '\0');
  state.max_tail = std::max(state.max_tail, tail.size());
  *state.frame_fields.TryEmplace(frame).first = fields;
  return fields;
}

void PerfettoSink::PutHead(std::string& bytes, size_t tail_size) {
  // PutTailPacket's first bytes for a one-byte delta (its packet size: the timestamp's tag, the
  // delta, the tail); the delta's byte is written per packet. Only used while every tail is
  // shorter than 126 bytes (WriteCommonRun's head_limit), when the size is one byte.
  bytes += static_cast<char>((1 << 3) | 2);  // Trace.packet = 1, length-delimited
  bytes += static_cast<char>(1 + 1 + tail_size);
  bytes += static_cast<char>(packet::kTimestamp << 3);
  bytes += '\0';
}

inline void PerfettoSink::WriteTail(uint64_t delta_ns, const char* tail, size_t tail_size) {
  char* p = out_->Extend(kMaxTailPacketHead + tail_size + kTailPadding);
  out_->Commit(PutTailPacket(p, delta_ns, tail, tail_size));
}

inline char* PerfettoSink::PutTailPacket(char* p, uint64_t delta_ns, const char* tail,
                                         size_t tail_size) {
  const size_t packet_size = 1 + ProtoBuffer::VarintSize(delta_ns) + tail_size;
  *p++ = (1 << 3) | 2;  // Trace.packet = 1, length-delimited
  p = ProtoBuffer::PutVarintTo(p, packet_size);
  *p++ = packet::kTimestamp << 3;
  p = ProtoBuffer::PutVarintTo(p, delta_ns);
  // Whole 16-byte blocks: fixed-size copies the compiler inlines (a tail is a few dozen bytes;
  // the bytes past its end are overwritten by the next packet or never committed). The first two
  // without a loop test: an end's tail and most begins' fit in them (see kTailPadding).
  std::memcpy(p, tail, 16);
  std::memcpy(p + 16, tail + 16, 16);
  for (size_t i = 32; i < tail_size; i += 16) std::memcpy(p + i, tail + i, 16);
  return p + tail_size;
}

void PerfettoSink::WriteInferredBegin(ThreadState& state, uint64_t time_ns, FieldSpan fields) {
  // The bytes StartPacket + BeginRare + WritePacket produce for a started sequence and a frame
  // already interned, plus the "inferred" annotation: written straight into the output buffer.
  const uint64_t delta_ns = ClockDelta(state, time_ns);
  std::string_view sequence = state.sequence_field.view();
  std::string_view frame = std::string_view(state.field_bytes)
                               .substr(fields.offset + fields.size - fields.fields_size,
                                       fields.fields_size);
  std::string_view inferred = inferred_field_.view();
  const size_t event_size = 2 + frame.size() + inferred.size();
  const size_t packet_size = 1 + ProtoBuffer::VarintSize(delta_ns) + sequence.size() + 2 + 1 +
                             ProtoBuffer::VarintSize(event_size) + event_size;
  char* p = out_->Extend(packet_size + 11);
  *p++ = (1 << 3) | 2;  // Trace.packet = 1, length-delimited
  p = ProtoBuffer::PutVarintTo(p, packet_size);
  *p++ = packet::kTimestamp << 3;
  p = ProtoBuffer::PutVarintTo(p, delta_ns);
  p = ProtoBuffer::AppendTo(p, sequence);
  *p++ = packet::kSequenceFlags << 3;
  *p++ = packet::kSeqNeeds;
  *p++ = (packet::kTrackEvent << 3) | 2;
  p = ProtoBuffer::PutVarintTo(p, event_size);
  *p++ = event::kType << 3;
  *p++ = event::kSliceBegin;
  p = ProtoBuffer::AppendTo(p, frame);
  p = ProtoBuffer::AppendTo(p, inferred);
  out_->Commit(p);
}

void PerfettoSink::End(const ThreadKey& thread, uint64_t time_ns) {
  std::lock_guard lock(mutex_);
  EndLocked(StateFor(thread), time_ns);
}

inline void PerfettoSink::EndLocked(ThreadState& state, uint64_t time_ns) {
  if (state.open_slices == 0) return;  // never write an unmatched END
  --state.open_slices;
  time_ns = std::max(time_ns, state.last_time);
  state.last_time = time_ns;
  if (state.sequence_started) {
    WriteFastEnd(state, time_ns);
    return;
  }
  StartPacket(state, false, time_ns, true);
  event_.Clear();
  event_.Varint(event::kType, event::kSliceEnd);
  packet_.Message(packet::kTrackEvent, event_);
  WritePacket();
}

inline void PerfettoSink::WriteFastEnd(ThreadState& state, uint64_t time_ns) {
  WriteTail(ClockDelta(state, time_ns), state.end_tail.data() + kHeadSize,
            state.end_tail.size() - kHeadSize - kTailPadding);
}

void PerfettoSink::Instant(const ThreadKey& thread, uint64_t time_ns, const std::string& text) {
  std::lock_guard lock(mutex_);
  InstantLocked(StateFor(thread), time_ns, text);
}

void PerfettoSink::InstantLocked(ThreadState& state, uint64_t time_ns, const std::string& text) {
  time_ns = std::max(time_ns, state.last_time);
  state.last_time = time_ns;
  StartPacket(state, false, time_ns, true);
  event_.Clear();
  event_.Varint(event::kType, event::kInstant);
  event_.Bytes(event::kName, text);
  packet_.Message(packet::kTrackEvent, event_);
  WritePacket();
}

void PerfettoSink::Finish() {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  finished_ = true;
  for (auto& state : threads_) {  // close what a caller left open, so the trace stays balanced
    while (state->open_slices > 0) EndLocked(*state, state->last_time);
  }
  error_ = out_->Close();
}

}  // namespace ptscope::decode
