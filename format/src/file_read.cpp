#include "ptscope/file_read.h"

#include <unistd.h>

#include <cerrno>

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

}  // namespace ptscope::format
