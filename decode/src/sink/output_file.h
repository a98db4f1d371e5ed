// A buffered output file for the sinks: plain, gzip (path ends in .gz) or stdout ("-").
// Write errors are remembered, not thrown or printed: Close() reports the first one.
// A file is written beside its path and renamed over it by a Close() that succeeds (see
// ptscope/output_file.h: a symbolic link at the path is refused, never followed); an output that
// is not closed (the decode failed) or whose writing failed (ENOSPC, EIO) is removed, so no
// truncated trace is left that looks usable.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "ptscope/output_file.h"
#include "ptscope/result.h"

namespace ptscope::decode {

class OutputFile {
 public:
  static Result<std::unique_ptr<OutputFile>> Open(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void Write(std::string_view bytes);
  // Direct writing for the hot paths: room for `max_bytes` at the returned pointer; Commit(end)
  // then keeps the bytes up to `end`.
  char* Extend(size_t max_bytes) {
    if (used_ + max_bytes > capacity_) MakeRoom(max_bytes);
    return buffer_.get() + used_;
  }
  void Commit(const char* end) { used_ = static_cast<size_t>(end - buffer_.get()); }
  // Flushes, closes and puts the file at its path; returns "" on success or a one-line message
  // naming the file (the file is then not there).
  std::string Close();
  const std::string& path() const { return path_; }

 private:
  OutputFile() = default;
  void Drain();
  void MakeRoom(size_t bytes);
  void CloseStreams();
  std::string path_;
  std::unique_ptr<format::OutputFile> target_;  // the file being written (not for stdout)
  std::FILE* file_ = nullptr;  // stdout ("-")
  void* gz_ = nullptr;  // gzFile when compressing
  bool is_stdout_ = false;
  bool closed_ = false;
  std::unique_ptr<char[]> buffer_;
  size_t used_ = 0, capacity_ = 0;
  std::string error_;
};

}  // namespace ptscope::decode
