// (see temp_file.h)
#include "temp_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace ptscope::decode {

int OpenScratchFile(std::string* dir) {
  const char* tmpdir = std::getenv("TMPDIR");
  *dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  int fd = open(dir->c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::string name = *dir + "/ptscope-spill.XXXXXX";
    fd = mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) unlink(name.c_str());
  }
  return fd;
}

bool WriteAllAt(int fd, const uint8_t* data, size_t size, off_t offset) {
  while (size > 0) {
    ssize_t n = pwrite(fd, data, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return true;
}

bool ReadAllAt(int fd, uint8_t* data, size_t size, off_t offset) {
  while (size > 0) {
    ssize_t n = pread(fd, data, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;  // the file is shorter than what was written to it
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return true;
}

}  // namespace ptscope::decode
