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
  if (index_fd_ >= 0) close(index_fd_);
}

void RunStore::Add(uint32_t tid, uint64_t time_ns, std::span<const uint64_t> addresses) {
  RunRef run{time_ns, flushed_ + buffer_.size(), 0, addresses.size(), tid, 0};
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
  longest_run_bytes_ = std::max(longest_run_bytes_, run.bytes);
  runs_.push_back(run);
  if (runs_.size() >= index_runs_) SpillIndex();
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

void RunStore::SpillIndex() {
  if (index_unusable_) return;  // runs_ grows, as it would with no file at all
  if (index_fd_ < 0) index_fd_ = OpenScratchFile(&dir_);
  Sort();
  const Chunk chunk{index_file_runs_, runs_.size()};
  const auto at = static_cast<off_t>(chunk.first * sizeof(RunRef));
  if (index_fd_ < 0 || !WriteAllAt(index_fd_, reinterpret_cast<const uint8_t*>(runs_.data()),
                                   runs_.size() * sizeof(RunRef), at)) {
    index_unusable_ = true;  // these stay in memory: sorted now, and sorted again with later ones
    return;
  }
  chunks_.push_back(chunk);
  index_file_runs_ += chunk.count;
  runs_.clear();
}

void RunStore::Sort() {
  std::stable_sort(runs_.begin(), runs_.end(), [](const RunRef& a, const RunRef& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    return a.time_ns < b.time_ns;
  });
}

Error RunStore::Changed(const std::string& what) const {
  return MakeError(Errc::kIo, "the instruction listing's temporary file in " + dir_ +
                                  " changed under the decode (" + what + ")");
}

Error RunStore::Unreadable(const char* where, uint64_t offset) const {
  return MakeError(Errc::kIo, "the instruction listing's temporary file in " + dir_ +
                                  " could not be read back at " + where + std::to_string(offset) +
                                  ": " + std::strerror(errno));
}

bool RunStore::HeadAfter(size_t a, size_t b) const {
  const RunRef& x = cursors_[a].head;
  const RunRef& y = cursors_[b].head;
  if (x.tid != y.tid) return x.tid > y.tid;
  if (x.time_ns != y.time_ns) return x.time_ns > y.time_ns;
  return a > b;
}

// The merge: one cursor a chunk, in the order they were written, and the last for runs_.
Status RunStore::StartMerge() {
  Sort();
  cursors_.clear();
  heap_.clear();
  for (const Chunk& chunk : chunks_) {
    cursors_.emplace_back();
    cursors_.back().unread = chunk.first;
    cursors_.back().end = chunk.first + chunk.count;
  }
  cursors_.emplace_back();
  cursors_.back().in_file = false;
  cursors_.back().end = runs_.size();
  for (size_t i = 0; i < cursors_.size(); ++i) {
    PTSCOPE_ASSIGN_OR_RETURN(const bool has_runs, Advance(i));
    if (has_runs) heap_.push_back(i);
  }
  std::make_heap(heap_.begin(), heap_.end(),
                 [this](size_t a, size_t b) { return HeadAfter(a, b); });
  return Ok();
}

Result<bool> RunStore::Advance(size_t index) {
  Cursor& cursor = cursors_[index];
  if (!cursor.in_file) {
    if (cursor.unread == cursor.end) return false;
    cursor.head = runs_[cursor.unread++];
    return true;
  }
  if (cursor.at == cursor.read.size()) {
    if (cursor.unread == cursor.end) return false;
    const uint64_t count = std::min<uint64_t>(kMergeRecords, cursor.end - cursor.unread);
    cursor.read.resize(static_cast<size_t>(count));
    cursor.at = 0;
    const uint64_t offset = cursor.unread * sizeof(RunRef);
    if (!ReadAllAt(index_fd_, reinterpret_cast<uint8_t*>(cursor.read.data()),
                   static_cast<size_t>(count * sizeof(RunRef)), static_cast<off_t>(offset))) {
      return Unreadable("index offset ", offset);
    }
    cursor.unread += count;
  }
  const RunRef run = cursor.read[cursor.at++];
  const uint64_t where = (cursor.unread - cursor.read.size() + cursor.at - 1) * sizeof(RunRef);
  const uint64_t written = flushed_ + buffer_.size();
  // Within what was written, no longer than the longest run added (so that a changed record
  // cannot ask for more memory than the decode already used), at least a byte an address.
  if (run.bytes > longest_run_bytes_ || run.offset > written - run.bytes ||
      run.count > run.bytes || run.zero != 0) {
    return Changed("the run index record at offset " + std::to_string(where) +
                   " points outside the runs written");
  }
  const bool before_head = run.tid < cursor.head.tid ||
                           (run.tid == cursor.head.tid && run.time_ns < cursor.head.time_ns);
  if (cursor.started && before_head) {
    return Changed("the run index record at offset " + std::to_string(where) +
                   " is out of order");
  }
  cursor.head = run;
  cursor.started = true;
  return true;
}

Result<const RunStore::RunRef*> RunStore::NextRun() {
  if (heap_.empty()) return static_cast<const RunRef*>(nullptr);
  const auto later = [this](size_t a, size_t b) { return HeadAfter(a, b); };
  std::pop_heap(heap_.begin(), heap_.end(), later);
  const size_t index = heap_.back();
  current_ = cursors_[index].head;
  PTSCOPE_ASSIGN_OR_RETURN(const bool has_runs, Advance(index));
  if (has_runs) {
    std::push_heap(heap_.begin(), heap_.end(), later);
  } else {
    heap_.pop_back();
  }
  return static_cast<const RunRef*>(&current_);
}

Status RunStore::Load(const RunRef& run) {
  // The run's bytes: those in the file, then those still in the buffer.
  read_.resize(static_cast<size_t>(run.bytes));
  const uint64_t in_file = run.offset < flushed_ ? std::min(run.bytes, flushed_ - run.offset) : 0;
  if (in_file != 0 &&
      !ReadAllAt(fd_, read_.data(), static_cast<size_t>(in_file), static_cast<off_t>(run.offset))) {
    return Unreadable("offset ", run.offset);
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
      return Changed("a run at offset " + std::to_string(run.offset) + " does not decode");
    }
    previous += Unzigzag(v);
    address = previous;
  }
  if (p != end) {
    return Changed("a run at offset " + std::to_string(run.offset) + " has bytes past its end");
  }
  return Ok();
}

}  // namespace ptscope::decode
