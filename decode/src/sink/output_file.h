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
  // Flushes and closes; returns "" on success or a one-line message naming the file.
  std::string Close();
  const std::string& path() const { return path_; }

 private:
  OutputFile() = default;
  void Drain();
  std::string path_;
  std::FILE* file_ = nullptr;
  void* gz_ = nullptr;  // gzFile when compressing
  bool is_stdout_ = false;
  bool closed_ = false;
  std::string buffer_;
  std::string error_;
};

}  // namespace ptscope::decode
