// PT bytes read again from the capture file they were first read from: for an Archive read with
// ReadOptions::keep_pt_bytes = false (Archive::pt_refs says where each chunk's bytes are). The one
// reader of them: pt-decode reads through it as its units are cut, export-perf and
// WriteImportedArchive as they write each piece.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ptscope/file_read.h"
#include "ptscope/format.h"
#include "ptscope/result.h"

namespace ptscope::format {

// A .ptar's PT data chunk is read through an ArchiveReader (checked and decompressed as the first
// read did, and it must hold the bytes the first read found); a perf.data's raw AUXTRACE bytes
// with pread. The file is opened at the first read and kept; the last chunk read is kept, so
// asking for it again reads nothing. Errors name the file and the offset: the file changed since
// it was first read, or went away.
class PtChunkReader {
 public:
  explicit PtChunkReader(std::string path);
  ~PtChunkReader();
  PtChunkReader(PtChunkReader&& other) noexcept;
  PtChunkReader& operator=(PtChunkReader&&) = delete;
  PtChunkReader(const PtChunkReader&) = delete;
  PtChunkReader& operator=(const PtChunkReader&) = delete;

  // The ref.size PT bytes of the chunk at file offset ref.chunk_offset (ref.raw: the file holds
  // the bytes themselves there), valid until the next Read or Forget.
  Result<std::span<const uint8_t>> Read(const Archive::PtDataRef& ref);
  // Frees the kept chunk (for a caller that copied what it needed).
  void Forget();

 private:
  Status ReadRaw(const Archive::PtDataRef& ref);

  std::string path_;
  std::unique_ptr<ArchiveReader> reader_;  // .ptar chunks, opened at the first read
  int fd_ = -1;                            // raw chunks, opened at the first read
  FileWindow window_;                      // fd_'s reads (pieces in file order: few preads)
  uint64_t kept_offset_ = UINT64_MAX;      // the chunk `kept_` holds
  std::vector<uint8_t> kept_;
};

}  // namespace ptscope::format
