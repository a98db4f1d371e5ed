// Held-back slice records in a temporary file (see record_spill.h).
#include "stack/record_spill.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace ptscope::decode {
namespace {

// Records go to the file as their bytes and come back in the same process: a kInstant's text
// pointer stays valid (the tracker keeps the texts until the flush that reads the block).
static_assert(std::is_trivially_copyable_v<SliceRecord>);

bool WriteAll(int fd, const char* data, size_t size, off_t offset) {
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

bool ReadAll(int fd, char* data, size_t size, off_t offset) {
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

}  // namespace

RecordSpill::RecordSpill(size_t block_records) : block_records_(std::max<size_t>(1, block_records)) {}

RecordSpill::~RecordSpill() {
  if (fd_ >= 0) close(fd_);
}

bool RecordSpill::Open() {
  if (fd_ >= 0) return true;
  if (unusable_) return false;
  const char* dir = std::getenv("TMPDIR");
  path_ = dir != nullptr && *dir != '\0' ? dir : "/tmp";
  // Unnamed from the start where the file system can (O_TMPFILE), else named and unlinked at once.
  fd_ = open(path_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    std::string name = path_ + "/ptscope-spill.XXXXXX";
    fd_ = mkostemp(name.data(), O_CLOEXEC);
    if (fd_ >= 0) unlink(name.c_str());
  }
  if (fd_ < 0) unusable_ = true;
  return fd_ >= 0;
}

int64_t RecordSpill::Store(const SliceRecord* records) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!Open()) return -1;
  int64_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = slots_++;
  }
  const size_t bytes = block_records_ * sizeof(SliceRecord);
  if (!WriteAll(fd_, reinterpret_cast<const char*>(records), bytes,
                static_cast<off_t>(slot) * static_cast<off_t>(bytes))) {
    // Disk full or the like: the trackers keep what they hold in memory from now on.
    free_slots_.push_back(slot);
    unusable_ = true;
    return -1;
  }
  ++stored_;
  peak_in_use_ = std::max(peak_in_use_, ++in_use_);
  return slot;
}

bool RecordSpill::Load(int64_t slot, size_t first, size_t count, SliceRecord* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  const off_t offset = (static_cast<off_t>(slot) * static_cast<off_t>(block_records_) +
                        static_cast<off_t>(first)) * static_cast<off_t>(sizeof(SliceRecord));
  const bool ok = fd_ >= 0 && first + count <= block_records_ &&
                  ReadAll(fd_, reinterpret_cast<char*>(out), count * sizeof(SliceRecord), offset);
  if (!ok && error_.empty()) {
    error_ = "cannot read held-back slice records back from the temporary file in " + path_ +
             " (" + std::strerror(errno) + "): the output would lack them; set TMPDIR to a "
             "directory on a working disk, or decode a shorter --time-range";
  }
  return ok;
}

void RecordSpill::Release(int64_t slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_slots_.push_back(slot);
  --in_use_;
}

uint64_t RecordSpill::blocks_stored() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stored_;
}

size_t RecordSpill::peak_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_in_use_;
}

std::string RecordSpill::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

}  // namespace ptscope::decode
