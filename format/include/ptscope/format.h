// The .ptar capture archive: the one file every ptscope tool writes or reads.
// format/FORMAT.md is the normative description of the bytes; this header is the C++ view of it.
//
// An archive is a file header followed by self-delimiting, checksummed chunks, appended in order.
// A writer killed at any instant leaves a file whose complete chunks all read back. A clean close
// appends an End chunk, so a reader can tell a complete capture from a cut-off one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ptscope/file_read.h"
#include "ptscope/perf_time.h"
#include "ptscope/result.h"

namespace ptscope::format {

inline constexpr uint16_t kVersionMajor = 1;
inline constexpr uint16_t kVersionMinor = 0;

// Feature bits in the file header: optional content a reader may want to know about up front.
enum FeatureBits : uint64_t {
  kFeatureEmulated = 1u << 0,        // PT bytes were produced by pt-emulate, not hardware
  kFeatureSnapshot = 1u << 1,        // PT data is snapshot rings, not a full stream
  kFeaturePerCpu = 1u << 2,          // PT streams are per CPU (demultiplex with switch sideband)
  kFeatureEmbeddedBinaries = 1u << 3,
  kFeatureImportedPerf = 1u << 4,    // converted from a perf.data capture
};

struct FileHeader {
  uint16_t version_major = kVersionMajor;
  uint16_t version_minor = kVersionMinor;
  uint16_t min_reader_major = kVersionMajor;
  uint64_t features = 0;
  uint64_t created_unix_ns = 0;
};

enum class ChunkType : uint16_t {
  kMetadata = 1,
  kPtData = 2,
  kSidebandAttr = 3,
  kSideband = 4,
  kModule = 5,
  kBlob = 6,
  kMarker = 7,
  kTimeSync = 8,
  kEnd = 15,
};
const char* ChunkTypeName(ChunkType type);

// Key/value metadata. Well-known keys are listed in FORMAT.md ("Metadata keys"), e.g. "tool",
// "cpu.vendor", "pt.mtc_period", "time.mult". Several Metadata chunks may appear; later
// values for the same key win.
struct MetadataChunk {
  std::vector<std::pair<std::string, std::string>> entries;
};

// Flags on a piece of PT data (mirror perf's AUX flags where they mean the same).
enum PtDataFlags : uint32_t {
  kPtTruncated = 1u << 0,   // the kernel/emulator reported data missing after this piece
  kPtOverwritten = 1u << 1, // snapshot ring: older data was overwritten before this piece
  kPtPartial = 1u << 2,     // the piece is known to be incomplete
  kPtSnapshot = 1u << 3,    // this piece is (part of) a snapshot
};

// A contiguous piece of one PT byte stream. A stream is per thread (cpu == -1) or per CPU
// (tid == 0). Pieces of a stream appear in increasing stream_offset; a gap between the end of one
// piece and the start of the next, or bytes_lost_before > 0, means data was lost there.
struct PtDataChunk {
  uint32_t stream_id = 0;
  int32_t cpu = -1;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t stream_offset = 0;
  uint64_t reference_tsc = 0;       // TSC when the piece was copied out (perf AUXTRACE reference)
  uint32_t flags = 0;
  uint64_t bytes_lost_before = 0;
  uint32_t snapshot_index = 0;      // which snapshot this piece belongs to (0 for full mode)
  std::vector<uint8_t> data;
};

// Describes how to parse the raw perf records of the Sideband chunks that name attr_id.
struct SidebandAttrChunk {
  uint32_t attr_id = 0;
  uint64_t sample_type = 0;       // PERF_SAMPLE_* bits (TID, TIME, ID, CPU, IDENTIFIER, ...)
  uint64_t read_format = 0;
  bool sample_id_all = true;
  std::vector<uint64_t> ids;      // perf sample ids that belong to this attr
  std::vector<uint8_t> raw_attr;  // the perf_event_attr bytes as passed to the kernel (may be empty)
};

// Raw perf_event records (each starting with perf_event_header), verbatim, in time order.
struct SidebandChunk {
  uint32_t attr_id = 0;
  int32_t cpu = -1;
  std::vector<uint8_t> records;
};

// A module (executable, shared object) the capture saw mapped.
struct ModuleChunk {
  std::string path;
  std::vector<uint8_t> build_id;  // raw bytes (often 20); empty when unknown
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool embedded = false;          // a Blob of kind kElf with the same build id holds its bytes
};

enum class BlobKind : uint16_t {
  kVdso = 1,       // name: "vdso64" | "vdsox32" | "vdso32"; vaddr = where it was mapped
  kJitdump = 2,    // name: the original path, pid set
  kPerfMap = 3,    // name: the original path, pid set
  kElf = 4,        // an embedded binary, build_id set
  kDebugInfo = 5,  // embedded separate debug info, build_id set
  kOther = 6,
};
const char* BlobKindName(BlobKind kind);

struct BlobChunk {
  BlobKind kind = BlobKind::kOther;
  std::string name;
  uint32_t pid = 0;
  uint64_t vaddr = 0;
  std::vector<uint8_t> build_id;
  std::vector<uint8_t> data;
};

enum class MarkerKind : uint16_t {
  kCaptureStart = 1,
  kCaptureStop = 2,
  kSnapshotBegin = 3,
  kSnapshotEnd = 4,
  kTrigger = 5,     // a trigger hit (text: symbol or reason; value: address)
  kDataLoss = 6,    // value: bytes (or records) lost; text: cause
};
const char* MarkerKindName(MarkerKind kind);

struct MarkerChunk {
  MarkerKind kind = MarkerKind::kTrigger;
  uint64_t tsc = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  int32_t cpu = -1;
  uint64_t value = 0;
  std::string text;
};

// Pairs of (TSC, clock) readings taken during the capture, so that timestamps written by the
// runtime on another clock (jitdump's CLOCK_MONOTONIC) can be placed on the trace clock.
struct TimeSyncChunk {
  uint32_t clock_id = 1;  // Linux clockid_t: 1 = CLOCK_MONOTONIC
  std::vector<std::pair<uint64_t, uint64_t>> tsc_and_clock_ns;
};

// Written by ArchiveWriter::Close(): its presence means the capture is complete.
struct EndChunk {
  uint64_t chunk_count = 0;  // chunks before this one
};

using Chunk = std::variant<MetadataChunk, PtDataChunk, SidebandAttrChunk, SidebandChunk,
                           ModuleChunk, BlobChunk, MarkerChunk, TimeSyncChunk, EndChunk>;
ChunkType TypeOf(const Chunk& chunk);

struct WriterOptions {
  bool compress = true;        // lz4 a payload when that makes it smaller
  uint64_t features = 0;       // FeatureBits for the header
  bool sync_each_chunk = false;  // fdatasync after each chunk (recorders that may be killed)
  uint64_t created_unix_ns = 0;  // header timestamp; 0 = now (set it for reproducible files)
  // Write a temporary file beside the path, renamed over it by Close() only: for conversions
  // (import-perf), whose partial output is worth nothing, unlike a recording's readable prefix.
  bool replace_when_closed = false;
};

class OutputFile;

// Appends chunks to a new archive. The file is created with mode 0600 (replacing an existing
// regular file of that name; a symbolic link at the path is refused, never followed: see
// output_file.h). Each Write() is one write(2) of a whole chunk, so a killed writer leaves only
// complete chunks plus at most one torn tail, which readers detect and report. A Write() that
// fails (ENOSPC, EIO) cuts its partial chunk off again and says so: the file stays a readable,
// incomplete archive of every chunk written before.
class ArchiveWriter {
 public:
  static Result<std::unique_ptr<ArchiveWriter>> Create(const std::string& path,
                                                       const WriterOptions& options = {});
  ~ArchiveWriter();
  ArchiveWriter(const ArchiveWriter&) = delete;
  ArchiveWriter& operator=(const ArchiveWriter&) = delete;

  Status Write(const Chunk& chunk);
  Status Flush();
  // Appends the End chunk and closes the file. Without Close() the archive reads back as
  // incomplete (but every written chunk is still there).
  Status Close();
  // Closes and removes the file: for a capture whose setup failed before it recorded anything.
  void Discard();
  const std::string& path() const;
  uint64_t chunks_written() const { return chunks_written_; }
  uint64_t bytes_written() const;

 private:
  ArchiveWriter(std::unique_ptr<OutputFile> file, WriterOptions options);
  std::unique_ptr<OutputFile> file_;
  WriterOptions options_;
  uint64_t chunks_written_ = 0;
};

// A damaged range of the file, and why. Reading goes on after it (FORMAT.md "Reading and
// recovery rules"): only the damaged chunk's bytes are lost.
struct Damage {
  uint64_t offset = 0;        // file offset where the damaged/torn chunk starts
  uint64_t end = 0;           // where reading resumed: the next intact chunk, or the file size
  uint64_t chunk_index = 0;   // intact chunks read before it (the index of the damaged chunk
                              // when it is the first damage)
  Errc code = Errc::kCorrupt; // kTruncated, kChecksum, kCorrupt, or kIo (a read failed)
  std::string reason;         // names the chunk, its offset and the field
};

// The damaged ranges in one line, for a summary: "damaged [0x1a40, 0x2a80): chunk 7 at offset
// 0x1a40: payload checksum mismatch (...)", the first three joined by "; ", then how many more
// (pt-archive verify lists them all).
std::string DescribeDamage(const std::vector<Damage>& damage);

struct ChunkLocation {
  uint64_t offset = 0;  // of the chunk header
  ChunkType type = ChunkType::kMetadata;
  uint16_t flags = 0;
  uint64_t stored_size = 0;
  uint64_t raw_size = 0;
  uint64_t data_size = 0;  // PtData, Blob: bytes of their `data` (also when SkipData left it out)
};

// Reads an archive sequentially. Open() fails only when the file cannot be read or its header is
// not a usable .ptar header (bad magic, newer major version, truncated header). A damaged chunk
// does not end reading: the reader looks for the next intact chunk header (sync word and header
// checksum) and goes on from there; damage() lists each damaged range, in file order, and every
// intact chunk before and after them is returned. A cut-off chunk at the end of the file, or a
// read error, ends reading. Open() reads the file one chunk at a time: the reader holds one
// chunk and a window of read-ahead (FileWindow, 256 KiB), never the whole file (a read error
// after the header is Damage with Errc::kIo).
class ArchiveReader {
 public:
  static Result<std::unique_ptr<ArchiveReader>> Open(const std::string& path);
  // Reads from memory (tests, fuzzing). `name` is used in messages.
  static Result<std::unique_ptr<ArchiveReader>> FromBytes(std::vector<uint8_t> bytes,
                                                          std::string name = "<memory>");
  ~ArchiveReader();
  ArchiveReader(const ArchiveReader&) = delete;
  ArchiveReader& operator=(const ArchiveReader&) = delete;

  const FileHeader& header() const { return header_; }
  const std::string& name() const { return name_; }

  // The next intact chunk (past any damage), or std::nullopt at the end of the file.
  std::optional<Chunk> Next();
  // Location of the chunk Next() returned last.
  const ChunkLocation& last_location() const { return last_location_; }
  // From now on Next() leaves PtDataChunk::data (`pt`) and BlobChunk::data (`blobs`) empty: the
  // payload is still checked whole (its checksum), but the bytes, most of an archive, are not
  // copied out (last_location().data_size says how many there are; ReadChunkAt() reads them
  // again), and of a compressed PtData payload only the fields are decompressed (whether its
  // bytes decompress to raw_size, ReadChunkAt checks).
  void SkipData(bool pt, bool blobs) {
    skip_pt_data_ = pt;
    skip_blob_data_ = blobs;
  }
  // The chunk whose header starts at `offset` (a ChunkLocation::offset seen earlier), checked as
  // Next() checks it (but never looking further on): for a reader that comes back to a chunk
  // instead of holding its payload (pt-decode reads each PT chunk again where it decodes it).
  // Leaves Next()'s position alone.
  Result<Chunk> ReadChunkAt(uint64_t offset);
  uint64_t chunks_read() const { return chunks_read_; }
  // Intact chunks of types this version does not know (from newer minor versions), skipped.
  // They are included in chunks_read().
  uint64_t chunks_skipped() const { return chunks_skipped_; }
  bool complete() const { return saw_end_; }  // an End chunk was read
  // Every damaged range met so far, in file order (empty: no damage).
  const std::vector<Damage>& damage() const { return damage_; }
  uint64_t file_size() const { return size_; }

 private:
  ArchiveReader(std::vector<uint8_t> bytes, int fd, uint64_t size, std::string name);
  Status ParseHeader();
  void ReleaseLargeBuffers();
  struct ChunkOutcome;
  ChunkOutcome ReadChunk(uint64_t at, bool skip_pt_data, bool skip_blob_data);
  // The offset of the first intact chunk header at or after `from` (sync word and header
  // checksum), or the file size when there is none.
  Result<uint64_t> FindChunkHeader(uint64_t from);
  // `length` bytes at `offset`: a view of bytes_ (FromBytes), or read from fd_ into `buffer`
  // (Open: the file is read one chunk at a time, never held whole; small reads through window_
  // unless `read_ahead` is false). Shorter when the file ends (or shrank) before offset + length.
  Result<std::span<const uint8_t>> ReadAt(uint64_t offset, uint64_t length,
                                          std::vector<uint8_t>& buffer, bool read_ahead = true);
  std::vector<uint8_t> bytes_;  // FromBytes: the whole archive
  int fd_ = -1;                 // Open: the file, read chunk by chunk
  FileWindow window_;           // Open: fd_'s reads (chunks in file order: one pread for many)
  uint64_t size_ = 0;           // of the archive
  std::vector<uint8_t> head_buffer_;     // Open: the chunk header being checked
  std::vector<uint8_t> payload_buffer_;  // Open: the stored payload being checked
  std::vector<uint8_t> unpacked_;        // an lz4 payload, decompressed
  std::string name_;
  FileHeader header_;
  uint64_t pos_ = 0;
  uint64_t chunks_read_ = 0;
  uint64_t chunks_skipped_ = 0;
  bool saw_end_ = false;
  bool skip_pt_data_ = false, skip_blob_data_ = false;
  std::vector<Damage> damage_;
  ChunkLocation last_location_;
};

// The capture's TSC -> perf-time conversion: metadata time.shift, time.mult, time.zero and
// time.cap_user_time_zero (FORMAT.md "Metadata keys"). Read and checked once, where an archive or
// a perf.data is read (ParseTimeConversion), so that no consumer meets a value perf's arithmetic
// cannot take (a 33-bit mult truncated to 0, a shift of 64).
struct TimeConversion {
  perf::PerfTime perf;  // mult != 0, shift <= 63
  bool cap_user_time_zero = false;
};

// The last value of metadata `key` as a u64 written in decimal (what writers write) or 0x-hex;
// std::nullopt when absent or empty; an error naming `source`, the key and its value otherwise.
Result<std::optional<uint64_t>> MetadataNumber(
    const std::vector<std::pair<std::string, std::string>>& metadata, std::string_view key,
    const std::string& source);

// The conversion described by `metadata` (later values of a key win). std::nullopt when none is
// recorded (time.mult absent or 0: timestamps are then TSC values taken as ns). An error, naming
// `source`, the key and its value, for a value that is not a decimal (or 0x-hex) u64, a time.mult
// above 2^32 - 1 (perf's time_mult is 32 bits) or a time.shift above 63.
Result<std::optional<TimeConversion>> ParseTimeConversion(
    const std::vector<std::pair<std::string, std::string>>& metadata, const std::string& source);

// The whole archive in memory, sorted by kind, for tools that want everything at once.
struct Archive {
  std::string path;
  FileHeader header;
  std::vector<std::pair<std::string, std::string>> metadata;  // merged, in order of appearance
  std::vector<PtDataChunk> pt_data;
  // Parallel to pt_data: where each piece's chunk starts in the file (for
  // ArchiveReader::ReadChunkAt) and how many PT bytes it holds (also when `data` was not kept).
  // raw: the file holds the PT bytes themselves at chunk_offset (a perf.data AUXTRACE record's
  // trace, see ImportPerfData), not an archive chunk.
  struct PtDataRef {
    uint64_t chunk_offset = 0;
    uint64_t size = 0;
    bool raw = false;
  };
  std::vector<PtDataRef> pt_refs;
  std::vector<SidebandAttrChunk> sideband_attrs;
  std::vector<SidebandChunk> sideband;
  // Parallel to sideband when its records were not kept (ReadOptions::keep_sideband_bytes):
  // where each chunk starts (ForEachSidebandRecord reads it again there). Empty otherwise.
  std::vector<uint64_t> sideband_offsets;
  // The same for a perf.data (ImportPerfData): each chunk is the kernel records, in file order,
  // found in [begin, end) of the file's data section among other records (AUXTRACE and its trace
  // bytes, perf's own records), which reading it again skips; `records` of them, `bytes` long.
  struct SidebandRange {
    uint64_t begin = 0, end = 0;
    uint64_t bytes = 0;
    uint64_t records = 0;
  };
  std::vector<SidebandRange> sideband_ranges;
  // Whether the sideband's records were left in the file (sideband_offsets or sideband_ranges).
  bool sideband_in_file() const { return !sideband_offsets.empty() || !sideband_ranges.empty(); }
  std::vector<ModuleChunk> modules;
  std::vector<BlobChunk> blobs;
  // Parallel to blobs: where each blob's chunk starts and how many bytes its data holds (also
  // when `data` was not kept: ReadOptions::keep_blob_bytes, LoadBlobData).
  struct BlobRef {
    uint64_t chunk_offset = 0;
    uint64_t size = 0;
  };
  std::vector<BlobRef> blob_refs;
  std::vector<MarkerChunk> markers;
  std::vector<TimeSyncChunk> time_syncs;
  // From the metadata, checked (ParseTimeConversion): what every consumer uses instead of the
  // time.* keys. Set by ReadArchive and ImportPerfData; an Archive built by hand sets it itself.
  std::optional<TimeConversion> time;
  uint64_t chunks_read = 0;
  bool complete = false;           // the End chunk was read
  // Damaged ranges, in file order (ArchiveReader::damage); first, with end 0, the damage of
  // the perf.data an archive was imported from (metadata import.damage).
  std::vector<Damage> damage;

  // Last value of a metadata key, if present.
  std::optional<std::string> Get(std::string_view key) const;
};

struct ReadOptions {
  // false: every PtDataChunk::data is left empty (Archive::pt_refs says where to read it again),
  // so that the PT bytes, most of a capture, are not held in memory all at once.
  bool keep_pt_bytes = true;
  // false: every BlobChunk::data is left empty (Archive::blob_refs says where it is): embedded
  // binaries and JIT dumps are loaded one at a time where they are used (LoadBlobData), so that
  // an archive of large, well-compressed blobs never has them all in memory.
  bool keep_blob_bytes = true;
  // false: every SidebandChunk::records is left empty (Archive::sideband_offsets says where it
  // is), read again one chunk at a time by ForEachSidebandRecord: a per-CPU capture has a few
  // context-switch records per millisecond and CPU, as many as the capture is long.
  bool keep_sideband_bytes = true;
};
// Every intact chunk of the archive, and Archive::time from its metadata; fails when the file
// cannot be opened, its header is unusable, or its time conversion is impossible.
Result<Archive> ReadArchive(const std::string& path, const ReadOptions& options = {});
Result<Archive> ReadArchiveFromBytes(std::vector<uint8_t> bytes, std::string name);

// The data of archive.blobs[index]: a copy of BlobChunk::data when it was kept, else read again
// from archive.path (checked as when it was read; an archive changed since is an error naming
// the chunk's offset).
Result<std::vector<uint8_t>> LoadBlobData(const Archive& archive, size_t index);

// Lowercase hex of a build id (or any bytes), and back.
std::string ToHex(const std::vector<uint8_t>& bytes);
std::optional<std::vector<uint8_t>> FromHex(std::string_view hex);
// An address or offset as messages print it: "0x1f". (One spelling for every library.)
std::string HexAddress(uint64_t value);

}  // namespace ptscope::format
