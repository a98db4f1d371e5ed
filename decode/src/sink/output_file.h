// A buffered output file for the sinks: plain, gzip (path ends in .gz) or stdout ("-").
// Write errors are remembered, not thrown or printed: Close() reports the first one.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

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
  // Flushes and closes; returns "" on success or a one-line message naming the file.
  std::string Close();
  const std::string& path() const { return path_; }

 private:
  OutputFile() = default;
  void Drain();
  void MakeRoom(size_t bytes);
  std::string path_;
  std::FILE* file_ = nullptr;
  void* gz_ = nullptr;  // gzFile when compressing
  bool is_stdout_ = false;
  bool closed_ = false;
  std::unique_ptr<char[]> buffer_;
  size_t used_ = 0, capacity_ = 0;
  std::string error_;
};

}  // namespace ptscope::decode
