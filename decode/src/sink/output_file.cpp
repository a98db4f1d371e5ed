#include "sink/output_file.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ptscope::decode {
namespace {
// Small enough to stay in a core's L2 cache between fills (the kernel's copy at write() then reads
// it from there) while the decoder's other buffers stream through: with 1 MiB, a pt-synth decode
// had 3% more simulated L2 write misses (cachegrind, 512 KiB L2). A write per 128 KiB costs
// nothing measurable.
constexpr size_t kBufferBytes = 1 << 17;

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The mode fopen would have given: 0666 less the process's umask (read from /proc, since
// umask(2) can only be read by setting it, which is not thread-safe).
mode_t NewFileMode() {
  mode_t mask = 022;
  if (std::FILE* status = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, status) != nullptr) {
      unsigned value = 0;
      if (std::sscanf(line, "Umask: %o", &value) == 1) {
        mask = static_cast<mode_t>(value & 0777);
        break;
      }
    }
    std::fclose(status);
  }
  return 0666 & ~mask;
}
}  // namespace

Result<std::unique_ptr<OutputFile>> OutputFile::Open(const std::string& path) {
  std::unique_ptr<OutputFile> out(new OutputFile());
  out->path_ = path;
  if (path == "-") {
    out->file_ = stdout;
    out->is_stdout_ = true;
  } else {
    PTSCOPE_ASSIGN_OR_RETURN(format::OutputFile target,
                             format::OutputFile::CreateReplacing(path, NewFileMode()));
    out->target_ = std::make_unique<format::OutputFile>(std::move(target));
    // A plain file is written through the target itself (Drain). zlib closes the descriptor it
    // is given: it gets a copy of the target's.
    if (EndsWith(path, ".gz")) {
      const int fd = ::dup(out->target_->fd());
      if (fd >= 0) out->gz_ = gzdopen(fd, "wb1");
      if (out->gz_ == nullptr) {
        const int err = errno;
        if (fd >= 0) ::close(fd);
        return Unexpected(Errc::kIo, path + ": cannot open the output for writing: " +
                                         std::strerror(err));
      }
    }
  }
  out->buffer_ = std::make_unique<char[]>(kBufferBytes);
  out->capacity_ = kBufferBytes;
  return out;
}

// Not closed: the decode failed. The streams are closed and the unfinished file removed (by
// target_'s destructor), never put at the path.
OutputFile::~OutputFile() {
  if (!closed_) CloseStreams();
}

void OutputFile::Write(std::string_view bytes) {
  while (!bytes.empty()) {
    if (used_ == capacity_) Drain();
    size_t n = std::min(bytes.size(), capacity_ - used_);
    std::memcpy(buffer_.get() + used_, bytes.data(), n);
    used_ += n;
    bytes.remove_prefix(n);
  }
}

void OutputFile::MakeRoom(size_t bytes) {
  Drain();
  if (bytes > capacity_) {  // a huge packet (a very long name): grow once
    buffer_ = std::make_unique<char[]>(bytes);
    capacity_ = bytes;
  }
}

void OutputFile::Drain() {
  if (closed_) used_ = 0;  // nothing reaches a closed file
  if (used_ == 0) return;
  if (error_.empty()) {
    if (gz_ != nullptr) {
      int n = gzwrite(static_cast<gzFile>(gz_), buffer_.get(), static_cast<unsigned>(used_));
      if (n <= 0 || static_cast<size_t>(n) != used_) {
        int code = 0;
        error_ = path_ + ": gzip write failed: " + gzerror(static_cast<gzFile>(gz_), &code);
      }
    } else if (target_ != nullptr) {
      // One write(2) of the whole buffer. Through stdio it went out as three (stdio's own 4 KiB
      // block first, then the whole blocks after it, then the tail at the fflush), with about
      // 8 KiB of copies: strace, synth-10M.
      if (Status written = target_->Write(buffer_.get(), used_); !written) {
        error_ = written.error().message;
      }
    } else if (std::fwrite(buffer_.get(), 1, used_, file_) != used_ ||
               std::fflush(file_) != 0) {  // stdout; our buffer is large: stdio's adds nothing
      error_ = format::WriteError(path_, "write", errno).message;
    }
  }
  used_ = 0;
}

void OutputFile::CloseStreams() {
  closed_ = true;
  if (gz_ != nullptr) {
    if (gzclose(static_cast<gzFile>(gz_)) != Z_OK && error_.empty()) {
      error_ = path_ + ": closing gzip output failed (disk full?)";
    }
    gz_ = nullptr;
  } else if (file_ != nullptr) {
    bool failed = is_stdout_ ? std::fflush(file_) != 0 : std::fclose(file_) != 0;
    if (failed && error_.empty()) error_ = path_ + ": close failed: " + std::strerror(errno);
    file_ = nullptr;
  }
}

std::string OutputFile::Close() {
  if (closed_) return error_;
  Drain();
  CloseStreams();
  if (target_ != nullptr) {
    if (error_.empty()) {
      if (Status committed = target_->Commit(); !committed) error_ = committed.error().message;
    }
    target_.reset();  // not committed: the temporary file is removed
  }
  return error_;
}

}  // namespace ptscope::decode
