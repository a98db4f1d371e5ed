// Rewriting an archive while keeping every untouched chunk byte-identical: the original bytes of
// each chunk are copied verbatim, chosen chunks are replaced by newly encoded ones, new chunks are
// appended before the End chunk, and the End count and the header features are updated.
// New chunks are encoded by format::ArchiveWriter (into a scratch file), so this file knows only
// the chunk framing (32-byte header + payload padded to 8), never a payload layout.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ptscope/format.h"
#include "ptscope/result.h"

namespace ptscope::tools {

// An intact archive in memory: its bytes and every known chunk with the byte range it occupies.
struct SplicedArchive {
  std::string path;
  std::vector<uint8_t> bytes;
  format::FileHeader header;
  uint64_t header_size = 0;              // where the first chunk starts
  std::vector<format::Chunk> chunks;     // known chunk types, in file order, End excluded
  std::vector<uint64_t> chunk_begin;     // file offset of each chunk in `chunks`
  std::vector<uint64_t> chunk_end;       // offset just past its padding
  bool complete = false;                 // an End chunk was read
  uint64_t end_offset = 0;               // where the End chunk starts (file size when absent)
  uint64_t end_count = 0;                // chunks before End (unknown types included)
};

// Reads `path` and refuses any damage with one line naming the file, chunk and offset.
Result<SplicedArchive> ReadForSplice(const std::string& path);

struct SpliceEdits {
  uint64_t set_features = 0;                      // OR-ed into the header features
  std::map<size_t, format::Chunk> replace;        // index into chunks -> replacement
  std::vector<format::Chunk> append;              // written before the End chunk
};

// The bytes of the edited archive. With no edits (and features already set) they equal the
// input bytes. `scratch_dir` receives a temporary file while new chunks are encoded.
Result<std::vector<uint8_t>> Splice(const SplicedArchive& archive, const SpliceEdits& edits,
                                    const std::string& scratch_dir);

// Writes `bytes` to `path` atomically (a 0600 temp file in the same directory, fsync, rename).
Status WriteFileAtomically(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace ptscope::tools
