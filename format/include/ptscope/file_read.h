// Positioned reads that get every byte asked for: one place for the pread loop that the archive
// reader, the perf.data reader, pt-decode's PT reads and pt-record's ELF and vDSO reads share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ptscope::format {

struct FileRead {
  size_t bytes = 0;  // read into `out`: all `n`, or fewer when the file ends or a read fails
  int error = 0;     // errno of the read that failed, else 0 (a short count then means EOF)
};

// pread(fd) at `offset` until `n` bytes are in `out`, the file ends, or a read fails; EINTR and
// partial reads are retried.
FileRead ReadFileAt(int fd, uint64_t offset, size_t n, uint8_t* out);

// ReadFileAt through a window of read-ahead, for a reader that walks a file in small pieces
// (an archive's chunks: a 32-byte header, then a payload of a few hundred bytes; a perf.data's
// AUXTRACE pieces): one pread fills kWindowBytes, and the reads inside it are copies. A pread a
// piece cost ~1 us of system time: 118 K of them were a tenth of a 96 M-instruction decode.
// A read of kWindowBytes / 2 or more goes to the file directly. The window holds what the file
// held when it was filled; the callers check what they read (checksums, sizes) as before.
class FileWindow {
 public:
  static constexpr size_t kWindowBytes = size_t{256} << 10;
  // As ReadFileAt(fd, offset, n, out). An error or the end of the file past the bytes asked
  // for is not one: only the bytes asked for count.
  FileRead Read(int fd, uint64_t offset, size_t n, uint8_t* out);
  // Frees the window (the next read fills it again).
  void Release();

 private:
  std::unique_ptr<uint8_t[]> window_;
  uint64_t begin_ = 0;  // the file offset of window_[0]
  size_t filled_ = 0;   // bytes of window_ that hold the file's
};

}  // namespace ptscope::format
