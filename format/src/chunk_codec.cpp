// Payload layouts of every chunk type; format/FORMAT.md ("Chunk payloads") is the normative
// description and lists the same fields in the same order.
#include "chunk_codec.h"

#include <type_traits>

#include "byte_io.h"

namespace ptscope::format {
namespace {

constexpr uint32_t kAttrSampleIdAll = 1u << 0;
constexpr uint32_t kModuleEmbedded = 1u << 0;

void Encode(const MetadataChunk& c, ByteWriter& w) {
  w.U32(static_cast<uint32_t>(c.entries.size()));
  for (const auto& [key, value] : c.entries) {
    w.Str32(key);
    w.Str32(value);
  }
}
void Encode(const PtDataChunk& c, ByteWriter& w) {
  w.U32(c.stream_id);
  w.I32(c.cpu);
  w.U32(c.pid);
  w.U32(c.tid);
  w.U64(c.stream_offset);
  w.U64(c.reference_tsc);
  w.U32(c.flags);
  w.U32(c.snapshot_index);
  w.U64(c.bytes_lost_before);
  w.Vec64(c.data);
}
void Encode(const SidebandAttrChunk& c, ByteWriter& w) {
  w.U32(c.attr_id);
  w.U32(c.sample_id_all ? kAttrSampleIdAll : 0);
  w.U64(c.sample_type);
  w.U64(c.read_format);
  w.U32(static_cast<uint32_t>(c.ids.size()));
  for (uint64_t id : c.ids) w.U64(id);
  w.Vec32(c.raw_attr);
}
void Encode(const SidebandChunk& c, ByteWriter& w) {
  w.U32(c.attr_id);
  w.I32(c.cpu);
  w.Vec64(c.records);
}
void Encode(const ModuleChunk& c, ByteWriter& w) {
  w.Str32(c.path);
  w.Vec32(c.build_id);
  w.U64(c.size);
  w.I64(c.mtime_ns);
  w.U32(c.embedded ? kModuleEmbedded : 0);
}
void Encode(const BlobChunk& c, ByteWriter& w) {
  w.U16(static_cast<uint16_t>(c.kind));
  w.U16(0);
  w.U32(c.pid);
  w.U64(c.vaddr);
  w.Str32(c.name);
  w.Vec32(c.build_id);
  w.Vec64(c.data);
}
void Encode(const MarkerChunk& c, ByteWriter& w) {
  w.U16(static_cast<uint16_t>(c.kind));
  w.U16(0);
  w.U32(c.pid);
  w.U32(c.tid);
  w.I32(c.cpu);
  w.U64(c.tsc);
  w.U64(c.value);
  w.Str32(c.text);
}
void Encode(const TimeSyncChunk& c, ByteWriter& w) {
  w.U32(c.clock_id);
  w.U32(static_cast<uint32_t>(c.tsc_and_clock_ns.size()));
  for (const auto& [tsc, ns] : c.tsc_and_clock_ns) {
    w.U64(tsc);
    w.U64(ns);
  }
}
void Encode(const EndChunk& c, ByteWriter& w) { w.U64(c.chunk_count); }

// A count of fixed-size elements must fit in what is left: checked before reserving memory.
bool CountFits(const ByteReader& r, uint64_t count, uint64_t min_element_size) {
  return count <= r.remaining() / min_element_size;
}

Error CountError(const char* field, uint64_t count, const ByteReader& r) {
  return MakeError(Errc::kCorrupt, "field '" + std::string(field) + "' = " +
                                       std::to_string(count) + " does not fit in the " +
                                       std::to_string(r.remaining()) + " payload bytes left");
}

// A bytes64 field: copied, or (skip) only checked to fit; its length goes to *size when asked.
std::vector<uint8_t> BulkData(ByteReader& r, bool skip, uint64_t* size) {
  const uint64_t n = r.U64("data");
  if (size != nullptr) *size = n;
  if (!skip) return r.Vec("data", n);
  r.Skip("data", n);
  return {};
}

Result<Chunk> Decode(ByteReader& r, MetadataChunk c) {
  uint32_t count = r.U32("entry_count");
  if (r.ok() && !CountFits(r, count, 8)) return CountError("entry_count", count, r);
  c.entries.reserve(count);
  for (uint32_t i = 0; i < count && r.ok(); ++i) {
    std::string key = r.Str32("key");
    std::string value = r.Str32("value");
    c.entries.emplace_back(std::move(key), std::move(value));
  }
  return Chunk(std::move(c));
}
Result<Chunk> Decode(ByteReader& r, PtDataChunk c, const DataHandling& handling) {
  c.stream_id = r.U32("stream_id");
  c.cpu = r.I32("cpu");
  c.pid = r.U32("pid");
  c.tid = r.U32("tid");
  c.stream_offset = r.U64("stream_offset");
  c.reference_tsc = r.U64("reference_tsc");
  c.flags = r.U32("flags");
  c.snapshot_index = r.U32("snapshot_index");
  c.bytes_lost_before = r.U64("bytes_lost_before");
  // (The fields ArchiveReader decompresses alone when the bytes are skipped: kPtDataFieldBytes.)
  PTSCOPE_CHECK(!r.ok() || r.pos() + 8 == kPtDataFieldBytes);
  c.data = BulkData(r, handling.skip_pt, handling.data_size);
  return Chunk(std::move(c));
}
Result<Chunk> Decode(ByteReader& r, SidebandAttrChunk c) {
  c.attr_id = r.U32("attr_id");
  c.sample_id_all = (r.U32("attr_flags") & kAttrSampleIdAll) != 0;
  c.sample_type = r.U64("sample_type");
  c.read_format = r.U64("read_format");
  uint32_t count = r.U32("id_count");
  if (r.ok() && !CountFits(r, count, 8)) return CountError("id_count", count, r);
  c.ids.reserve(count);
  for (uint32_t i = 0; i < count && r.ok(); ++i) c.ids.push_back(r.U64("ids"));
  c.raw_attr = r.Vec32("raw_attr");
  return Chunk(std::move(c));
}
Result<Chunk> Decode(ByteReader& r, SidebandChunk c) {
  c.attr_id = r.U32("attr_id");
  c.cpu = r.I32("cpu");
  c.records = r.Vec64("records");
  return Chunk(std::move(c));
}
Result<Chunk> Decode(ByteReader& r, ModuleChunk c) {
  c.path = r.Str32("path");
  c.build_id = r.Vec32("build_id");
  c.size = r.U64("size");
  c.mtime_ns = r.I64("mtime_ns");
  c.embedded = (r.U32("module_flags") & kModuleEmbedded) != 0;
  return Chunk(std::move(c));
}
Result<Chunk> Decode(ByteReader& r, BlobChunk c, const DataHandling& handling) {
  c.kind = static_cast<BlobKind>(r.U16("kind"));
  r.U16("reserved");
  c.pid = r.U32("pid");
  c.vaddr = r.U64("vaddr");
  c.name = r.Str32("name");
  c.build_id = r.Vec32("build_id");
  c.data = BulkData(r, handling.skip_blob, handling.data_size);
  return Chunk(std::move(c));
}
Result<Chunk> Decode(ByteReader& r, MarkerChunk c) {
  c.kind = static_cast<MarkerKind>(r.U16("kind"));
  r.U16("reserved");
  c.pid = r.U32("pid");
  c.tid = r.U32("tid");
  c.cpu = r.I32("cpu");
  c.tsc = r.U64("tsc");
  c.value = r.U64("value");
  c.text = r.Str32("text");
  return Chunk(std::move(c));
}
Result<Chunk> Decode(ByteReader& r, TimeSyncChunk c) {
  c.clock_id = r.U32("clock_id");
  uint32_t count = r.U32("pair_count");
  if (r.ok() && !CountFits(r, count, 16)) return CountError("pair_count", count, r);
  c.tsc_and_clock_ns.reserve(count);
  for (uint32_t i = 0; i < count && r.ok(); ++i) {
    uint64_t tsc = r.U64("tsc");
    uint64_t ns = r.U64("clock_ns");
    c.tsc_and_clock_ns.emplace_back(tsc, ns);
  }
  return Chunk(std::move(c));
}
Result<Chunk> Decode(ByteReader& r, EndChunk c) {
  c.chunk_count = r.U64("chunk_count");
  return Chunk(c);
}

}  // namespace

bool IsKnownChunkType(uint16_t type) {
  return (type >= static_cast<uint16_t>(ChunkType::kMetadata) &&
          type <= static_cast<uint16_t>(ChunkType::kTimeSync)) ||
         type == static_cast<uint16_t>(ChunkType::kEnd);
}

void EncodePayload(const Chunk& chunk, std::vector<uint8_t>& out) {
  ByteWriter w(out);
  std::visit([&w](const auto& c) { Encode(c, w); }, chunk);
}

Result<Chunk> DecodePayload(ChunkType type, std::span<const uint8_t> payload,
                            const DataHandling& data) {
  ByteReader r(payload);
  // Each case returns its own Result (no error made up front and assigned over: a PT chunk's
  // decode runs once per chunk at open and again at its decode).
  Result<Chunk> chunk = [&]() -> Result<Chunk> {
    switch (type) {
      case ChunkType::kMetadata: return Decode(r, MetadataChunk{});
      case ChunkType::kPtData: return Decode(r, PtDataChunk{}, data);
      case ChunkType::kSidebandAttr: return Decode(r, SidebandAttrChunk{});
      case ChunkType::kSideband: return Decode(r, SidebandChunk{});
      case ChunkType::kModule: return Decode(r, ModuleChunk{});
      case ChunkType::kBlob: return Decode(r, BlobChunk{}, data);
      case ChunkType::kMarker: return Decode(r, MarkerChunk{});
      case ChunkType::kTimeSync: return Decode(r, TimeSyncChunk{});
      case ChunkType::kEnd: return Decode(r, EndChunk{});
    }
    return MakeError(Errc::kCorrupt, "unknown chunk type");
  }();
  if (chunk && !r.ok()) {
    return MakeError(Errc::kCorrupt, std::string(ChunkTypeName(type)) + " payload: " +
                                         r.FailureText());
  }
  return chunk;
}

ChunkType TypeOf(const Chunk& chunk) {
  static constexpr ChunkType kByIndex[] = {
      ChunkType::kMetadata, ChunkType::kPtData, ChunkType::kSidebandAttr,
      ChunkType::kSideband, ChunkType::kModule, ChunkType::kBlob,
      ChunkType::kMarker,   ChunkType::kTimeSync, ChunkType::kEnd};
  static_assert(std::size(kByIndex) == std::variant_size_v<Chunk>);
  return kByIndex[chunk.index()];
}

const char* ChunkTypeName(ChunkType type) {
  switch (type) {
    case ChunkType::kMetadata: return "Metadata";
    case ChunkType::kPtData: return "PtData";
    case ChunkType::kSidebandAttr: return "SidebandAttr";
    case ChunkType::kSideband: return "Sideband";
    case ChunkType::kModule: return "Module";
    case ChunkType::kBlob: return "Blob";
    case ChunkType::kMarker: return "Marker";
    case ChunkType::kTimeSync: return "TimeSync";
    case ChunkType::kEnd: return "End";
  }
  return "Unknown";
}

const char* BlobKindName(BlobKind kind) {
  switch (kind) {
    case BlobKind::kVdso: return "vdso";
    case BlobKind::kJitdump: return "jitdump";
    case BlobKind::kPerfMap: return "perf-map";
    case BlobKind::kElf: return "elf";
    case BlobKind::kDebugInfo: return "debuginfo";
    case BlobKind::kOther: return "other";
  }
  return "unknown";
}

const char* MarkerKindName(MarkerKind kind) {
  switch (kind) {
    case MarkerKind::kCaptureStart: return "capture-start";
    case MarkerKind::kCaptureStop: return "capture-stop";
    case MarkerKind::kSnapshotBegin: return "snapshot-begin";
    case MarkerKind::kSnapshotEnd: return "snapshot-end";
    case MarkerKind::kTrigger: return "trigger";
    case MarkerKind::kDataLoss: return "data-loss";
  }
  return "unknown";
}

}  // namespace ptscope::format
