// Creating output files the same safe way in every ptscope writer (archives, traces, perf.data,
// extracted files):
//  - the last component of the path is never followed when it is a symbolic link: writing through
//    a link would let whoever planted it choose which file a (possibly privileged) tool
//    overwrites or chmods, and a dangling link would get its target created;
//  - only a regular file is replaced; a FIFO, a device or a directory at the path is refused
//    (except by OpenReplacing, which writes a character device such as /dev/null in place);
//  - a new file gets the mode asked for (0600 for captures, which hold program data and paths);
//  - a failed write names the path and the cause (no space, I/O error, quota) in one sentence.
// Two ways to write:
//  - CreateInPlace: the file is written where it is, for append-only formats whose every
//    complete prefix is readable (the .ptar archive): when writing fails, what was written stays;
//  - CreateReplacing: a temporary file in the same directory, renamed over the path by Commit()
//    only, so a writer that fails or is killed never leaves a truncated file that looks complete.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ptscope/result.h"

namespace ptscope::format {

class OutputFile {
 public:
  // Creates `path` (mode `mode`) or truncates the regular file there and forces its mode.
  static Result<OutputFile> CreateInPlace(const std::string& path, mode_t mode = 0600);
  // Writes a temporary file beside `path`; Commit() renames it over `path`. A character device at
  // `path` (/dev/null) is written directly instead.
  static Result<OutputFile> CreateReplacing(const std::string& path, mode_t mode = 0600);

  OutputFile() = default;
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  // Closes the file. A replacing file that was not committed is removed; an in-place file stays.
  ~OutputFile();

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  uint64_t bytes_written() const { return bytes_written_; }

  // Writes every byte (retrying short writes and EINTR). On failure the error names the path and
  // the cause; bytes_written() counts only what was written completely before.
  Status Write(const void* data, size_t size);
  // Cuts the file back to `size` bytes (an in-place writer dropping a torn tail after a failed
  // write, so that what it writes next is not hidden behind it).
  Status TruncateTo(uint64_t size);
  Status Sync();
  // Finishes the file: closes it (in place) or syncs and renames it over the path (replacing).
  Status Commit();
  // Gives up on a file that holds nothing useful: closes and removes it, if the path still names
  // the file this object wrote (never a file someone put there since).
  void Discard();

 private:
  OutputFile(std::string path, std::string temp_path, int fd);
  void Close();

  std::string path_;
  std::string temp_path_;  // CreateReplacing: the file being written, renamed by Commit()
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  uint64_t bytes_written_ = 0;
  // Replacing files: bytes before this were handed to writeback (sync_file_range) every
  // kWritebackBytes, so that Commit's fdatasync waits for the tail only.
  static constexpr uint64_t kWritebackBytes = 8u << 20;
  uint64_t written_back_ = 0;
};

// The sentence for a failed write(2) (or fsync, close) of `path` with errno `err`, saying what the
// user can do: ENOSPC and EDQUOT "free space", EIO "the device reported an I/O error".
Error WriteError(const std::string& path, const char* what, int err);

}  // namespace ptscope::format
