#include "ptscope/file_read.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ptscope::format {

FileRead ReadFileAt(int fd, uint64_t offset, size_t n, uint8_t* out) {
  FileRead result;
  while (result.bytes < n) {
    ssize_t got = ::pread(fd, out + result.bytes, n - result.bytes,
                          static_cast<off_t>(offset + result.bytes));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      result.error = errno;
      break;
    }
    if (got == 0) break;  // end of file
    result.bytes += static_cast<size_t>(got);
  }
  return result;
}

FileRead FileWindow::Read(int fd, uint64_t offset, size_t n, uint8_t* out) {
  if (n >= kWindowBytes / 2) return ReadFileAt(fd, offset, n, out);
  if (window_ == nullptr || offset < begin_ || offset - begin_ + n > filled_) {
    if (window_ == nullptr) window_ = std::make_unique<uint8_t[]>(kWindowBytes);
    filled_ = 0;  // until the read succeeds
    const FileRead fill = ReadFileAt(fd, offset, kWindowBytes, window_.get());
    if (fill.bytes < n && fill.error != 0) {
      std::memcpy(out, window_.get(), fill.bytes);
      return fill;
    }
    begin_ = offset;
    filled_ = fill.bytes;
  }
  const size_t taken = std::min<size_t>(n, filled_ - (offset - begin_));
  std::memcpy(out, window_.get() + (offset - begin_), taken);
  return FileRead{taken, 0};
}

void FileWindow::Release() {
  window_.reset();
  begin_ = filled_ = 0;
}

}  // namespace ptscope::format
