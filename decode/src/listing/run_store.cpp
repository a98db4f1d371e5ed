// (see run_store.h)
#include "listing/run_store.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "temp_file.h"
#include "varint.h"

namespace ptscope::decode {
RunStore::~RunStore() {
  if (fd_ >= 0) close(fd_);
}

void RunStore::Add(uint32_t tid, uint64_t time_ns, std::span<const uint64_t> addresses) {
  RunRef run{tid, time_ns, flushed_ + buffer_.size(), 0, addresses.size()};
  uint64_t previous = 0;
  // In slices that fit the buffer's bound: a run's bytes stay contiguous across a flush (the
  // file and the buffer continue one another).
  constexpr size_t kSlice = kBufferBytes / kMaxVarintBytes;
  for (size_t first = 0; first < addresses.size(); first += kSlice) {
    const size_t last = std::min(addresses.size(), first + kSlice);
    if (buffer_.size() + (last - first) * kMaxVarintBytes > kBufferBytes) Flush();
    const size_t start = buffer_.size();
    buffer_.resize(start + (last - first) * kMaxVarintBytes);
    uint8_t* p = buffer_.data() + start;
    for (size_t i = first; i < last; ++i) {
      p = PutVarint(p, Zigzag(addresses[i] - previous));  // modulo 2^64: exact both ways
      previous = addresses[i];
    }
    buffer_.resize(static_cast<size_t>(p - buffer_.data()));
  }
  run.bytes = flushed_ + buffer_.size() - run.offset;
  runs_.push_back(run);
}

void RunStore::Flush() {
  if (buffer_.empty() || file_unusable_) return;
  if (fd_ < 0) fd_ = OpenScratchFile(&dir_);
  if (fd_ < 0 || !WriteAllAt(fd_, buffer_.data(), buffer_.size(), static_cast<off_t>(flushed_))) {
    file_unusable_ = true;  // the bytes stay in memory (as do all later ones)
    return;
  }
  flushed_ += buffer_.size();
  buffer_.clear();
}

void RunStore::Sort() {
  std::stable_sort(runs_.begin(), runs_.end(), [](const RunRef& a, const RunRef& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    return a.time_ns < b.time_ns;
  });
}

Status RunStore::Load(const RunRef& run) {
  // The run's bytes: those in the file, then those still in the buffer.
  read_.resize(static_cast<size_t>(run.bytes));
  const uint64_t in_file = run.offset < flushed_ ? std::min(run.bytes, flushed_ - run.offset) : 0;
  if (in_file != 0 &&
      !ReadAllAt(fd_, read_.data(), static_cast<size_t>(in_file), static_cast<off_t>(run.offset))) {
    return Unexpected(Errc::kIo, "the instruction listing's temporary file in " + dir_ +
                                     " could not be read back at offset " +
                                     std::to_string(run.offset) + ": " + std::strerror(errno));
  }
  if (in_file < run.bytes) {
    std::memcpy(read_.data() + in_file, buffer_.data() + (run.offset + in_file - flushed_),
                static_cast<size_t>(run.bytes - in_file));
  }
  addresses_.resize(static_cast<size_t>(run.count));
  const uint8_t* p = read_.data();
  const uint8_t* const end = p + read_.size();
  uint64_t previous = 0;
  for (uint64_t& address : addresses_) {
    uint64_t v = 0;
    if ((p = GetVarint<true>(p, end, &v)) == nullptr) {
      return Unexpected(Errc::kIo, "the instruction listing's temporary file in " + dir_ +
                                       " changed under the decode (a run at offset " +
                                       std::to_string(run.offset) + " does not decode)");
    }
    previous += Unzigzag(v);
    address = previous;
  }
  if (p != end) {
    return Unexpected(Errc::kIo, "the instruction listing's temporary file in " + dir_ +
                                     " changed under the decode (a run at offset " +
                                     std::to_string(run.offset) + " has bytes past its end)");
  }
  return Ok();
}

}  // namespace ptscope::decode
