// Positioned reads that get every byte asked for: one place for the pread loop that the archive
// reader, the perf.data reader, pt-decode's PT reads and pt-record's ELF and vDSO reads share.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ptscope::format {

struct FileRead {
  size_t bytes = 0;  // read into `out`: all `n`, or fewer when the file ends or a read fails
  int error = 0;     // errno of the read that failed, else 0 (a short count then means EOF)
};

// pread(fd) at `offset` until `n` bytes are in `out`, the file ends, or a read fails; EINTR and
// partial reads are retried.
FileRead ReadFileAt(int fd, uint64_t offset, size_t n, uint8_t* out);

}  // namespace ptscope::format
