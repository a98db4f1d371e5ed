#include "ptscope/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace ptscope::format {
namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Error NotRegular(const std::string& path, mode_t mode) {
  return MakeError(Errc::kInvalidArgument, path + ": is " + KindOf(mode) +
                                               ", not a regular file; choose a file name for the "
                                               "output");
}

Error OpenError(const std::string& path, int err) {
  struct stat st {};
  if (err == ELOOP || (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))) {
    return MakeError(Errc::kPermission,
                     path + ": is a symbolic link; ptscope never writes through one (remove the "
                            "link or choose another output path)");
  }
  // EISDIR, or ENXIO for a FIFO nobody reads: say what is there rather than the errno.
  if (st.st_mode != 0 && !S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  return MakeError(ErrcFromErrno(err), path + ": cannot create: " + std::strerror(err));
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string BaseOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Error WriteError(const std::string& path, const char* what, int err) {
  std::string advice;
  if (err == ENOSPC || err == EDQUOT) {
    advice = " (the file system is full: free space or write elsewhere)";
  } else if (err == EIO) {
    advice = " (the device reported an I/O error: check the disk and the kernel log)";
  } else if (err == EFBIG) {
    advice = " (the file grew past the file system's or ulimit -f's size limit)";
  }
  return MakeError(Errc::kIo, path + ": " + what + " failed: " + std::strerror(err) + advice);
}

OutputFile::OutputFile(std::string path, std::string temp_path, int fd)
    : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {
  struct stat st {};
  if (::fstat(fd_, &st) == 0) {
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
}

OutputFile::OutputFile(OutputFile&& other) noexcept { *this = std::move(other); }

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    Close();
    if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
    path_ = std::move(other.path_);
    temp_path_ = std::exchange(other.temp_path_, std::string());
    fd_ = std::exchange(other.fd_, -1);
    dev_ = other.dev_;
    ino_ = other.ino_;
    bytes_written_ = other.bytes_written_;
    written_back_ = other.written_back_;
  }
  return *this;
}

OutputFile::~OutputFile() {
  Close();
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());  // never committed
}

void OutputFile::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<OutputFile> OutputFile::CreateInPlace(const std::string& path, mode_t mode) {
  // O_NOFOLLOW: a symbolic link as the last component fails with ELOOP, dangling or not.
  // O_NONBLOCK: opening a FIFO must not block (it is refused below).
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                        mode);
  if (fd < 0) return OpenError(path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    if (st.st_mode != 0 && !S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
    return MakeError(ErrcFromErrno(err), path + ": cannot stat: " + std::strerror(err));
  }
  // O_NONBLOCK only kept a FIFO from blocking the open; a regular file ignores it anyway.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  // An existing file loses its old contents and its old mode, which may be wider than asked.
  if (::ftruncate(fd, 0) != 0 || ::fchmod(fd, mode) != 0) {
    const int err = errno;
    ::close(fd);
    return MakeError(ErrcFromErrno(err), path + ": cannot truncate it and set its mode: " +
                                             std::strerror(err));
  }
  return OutputFile(path, std::string(), fd);
}

Result<OutputFile> OutputFile::CreateReplacing(const std::string& path, mode_t mode) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) return OpenError(path, ELOOP);
    if (S_ISCHR(st.st_mode)) {  // /dev/null and friends: write them, never replace them
      const int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return OpenError(path, errno);
      return OutputFile(path, std::string(), fd);
    }
    if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  }
  std::string temp = DirectoryOf(path) + "/." + BaseOf(path) + ".XXXXXX";
  const int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return MakeError(ErrcFromErrno(err), path + ": cannot create a temporary file in " +
                                             DirectoryOf(path) + ": " + std::strerror(err));
  }
  if (::fchmod(fd, mode) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    return MakeError(ErrcFromErrno(err), temp + ": cannot set its mode: " + std::strerror(err));
  }
  return OutputFile(path, temp, fd);
}

Status OutputFile::Write(const void* data, size_t size) {
  if (fd_ < 0) return MakeError(Errc::kInvalidArgument, path_ + ": already closed");
  const auto* bytes = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd_, bytes + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return WriteError(path_, "write", errno);
    }
    if (n == 0) return WriteError(path_, "write", ENOSPC);  // a 0-byte write means no room
    done += static_cast<size_t>(n);
  }
  bytes_written_ += size;
  // A replacing file is synced before Commit renames it: writing back what is written as it
  // grows leaves that fdatasync little to wait for (on a 119 MB trace it waited 70-80 ms with
  // the whole file dirty). A hint only: its errors are fdatasync's to report.
  if (!temp_path_.empty() && bytes_written_ - written_back_ >= kWritebackBytes) {
    ::sync_file_range(fd_, static_cast<off_t>(written_back_),
                      static_cast<off_t>(bytes_written_ - written_back_), SYNC_FILE_RANGE_WRITE);
    written_back_ = bytes_written_;
  }
  return Ok();
}

Status OutputFile::TruncateTo(uint64_t size) {
  if (fd_ < 0) return MakeError(Errc::kInvalidArgument, path_ + ": already closed");
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0 ||
      ::lseek(fd_, static_cast<off_t>(size), SEEK_SET) < 0) {
    return WriteError(path_, "truncate", errno);
  }
  bytes_written_ = size;
  written_back_ = std::min(written_back_, size);
  return Ok();
}

Status OutputFile::Sync() {
  if (fd_ < 0) return MakeError(Errc::kInvalidArgument, path_ + ": already closed");
  if (::fdatasync(fd_) != 0 && errno != EINVAL) return WriteError(path_, "fdatasync", errno);
  return Ok();
}

Status OutputFile::Commit() {
  if (fd_ < 0) return MakeError(Errc::kInvalidArgument, path_ + ": already closed");
  if (!temp_path_.empty()) PTSCOPE_TRY(Sync());  // the rename must not publish unwritten data
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return WriteError(path_, "close", errno);
  if (temp_path_.empty()) return Ok();
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    return MakeError(ErrcFromErrno(err), path_ + ": cannot rename " + temp_path_ + " over it: " +
                                             std::strerror(err));
  }
  temp_path_.clear();
  return Ok();
}

void OutputFile::Discard() {
  Close();
  if (!temp_path_.empty()) {
    ::unlink(temp_path_.c_str());
    temp_path_.clear();
    return;
  }
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
    ::unlink(path_.c_str());
  }
}

}  // namespace ptscope::format
