// FileWindow: reads through the window return exactly the file's bytes (small, large, across the
// window's end, at and past the end of the file), the bytes inside a filled window are served
// from it without reading the file again, and a failed read reports its errno.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "ptscope/file_read.h"

namespace ptscope::format {
namespace {

constexpr size_t kWindow = FileWindow::kWindowBytes;

struct TempFile {
  explicit TempFile(const std::vector<uint8_t>& bytes) {
    char templ[] = "/tmp/ptscope-window-XXXXXX";
    fd = ::mkstemp(templ);
    path = templ;
    REQUIRE(fd >= 0);
    REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
  }
  ~TempFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
  int fd = -1;
  std::string path;
};

// Bytes that differ at every offset a test reads (a counter would repeat every 256 bytes).
std::vector<uint8_t> Pattern(size_t size, uint32_t seed) {
  std::vector<uint8_t> bytes(size);
  uint32_t state = seed;
  for (uint8_t& byte : bytes) {
    state = state * 1664525u + 1013904223u;
    byte = static_cast<uint8_t>(state >> 24);
  }
  return bytes;
}

std::vector<uint8_t> ReadThrough(FileWindow& window, int fd, uint64_t offset, size_t n,
                                 FileRead* result) {
  std::vector<uint8_t> out(n, 0xEE);
  *result = window.Read(fd, offset, n, out.data());
  out.resize(result->bytes);
  return out;
}

std::vector<uint8_t> Slice(const std::vector<uint8_t>& bytes, size_t offset, size_t n) {
  if (offset >= bytes.size()) return {};
  return std::vector<uint8_t>(bytes.begin() + offset,
                              bytes.begin() + std::min(bytes.size(), offset + n));
}

TEST_CASE("FileWindow returns the file's bytes for every read, in order or not") {
  const size_t size = 3 * kWindow + 777;
  const std::vector<uint8_t> bytes = Pattern(size, 1);
  TempFile file(bytes);
  FileWindow window;
  struct Case {
    uint64_t offset;
    size_t n;
  };
  const Case cases[] = {
      {0, 32},                          // fills the window
      {32, 600},                        // inside it
      {kWindow - 16, 32},               // across its end: filled again from there
      {kWindow + 100, kWindow / 2},     // large: read directly
      {5, 7},                           // behind the window: filled again
      {size - 10, 32},                  // the file's last 10 bytes: a short read
      {size, 8},                        // at the end: nothing
      {size + 4096, 8},                 // past it: nothing
      {2 * kWindow, kWindow + 5},       // large, past the end: short
      {kWindow / 2, kWindow / 2 - 1},   // the largest read the window serves
  };
  for (const Case& c : cases) {
    CAPTURE(c.offset);
    CAPTURE(c.n);
    FileRead result;
    const std::vector<uint8_t> got = ReadThrough(window, file.fd, c.offset, c.n, &result);
    CHECK(result.error == 0);
    CHECK(got == Slice(bytes, c.offset, c.n));
  }
  // A walk in pieces of a few hundred bytes, as an archive's chunks are read, puts the file
  // together again.
  std::vector<uint8_t> walked;
  for (uint64_t at = 0; at < size;) {
    const size_t n = 32 + (at * 7919) % 900;
    FileRead result;
    const std::vector<uint8_t> got = ReadThrough(window, file.fd, at, n, &result);
    REQUIRE(result.error == 0);
    REQUIRE(!got.empty());
    walked.insert(walked.end(), got.begin(), got.end());
    at += got.size();
  }
  CHECK(walked == bytes);
}

TEST_CASE("FileWindow serves a filled window without reading the file; large reads read it") {
  const std::vector<uint8_t> before = Pattern(2 * kWindow, 2);
  const std::vector<uint8_t> after = Pattern(2 * kWindow, 3);
  TempFile file(before);
  FileWindow window;
  FileRead result;
  CHECK(ReadThrough(window, file.fd, 64, 16, &result) == Slice(before, 64, 16));
  REQUIRE(::pwrite(file.fd, after.data(), after.size(), 0) == static_cast<ssize_t>(after.size()));
  // Inside the window filled at 64: what the file held then.
  CHECK(ReadThrough(window, file.fd, 1000, 500, &result) == Slice(before, 1000, 500));
  CHECK(ReadThrough(window, file.fd, 64 + kWindow - 8, 8, &result) ==
        Slice(before, 64 + kWindow - 8, 8));
  // Large reads, and small ones outside the window, read the file now.
  CHECK(ReadThrough(window, file.fd, 100, kWindow / 2, &result) == Slice(after, 100, kWindow / 2));
  CHECK(ReadThrough(window, file.fd, 10, 8, &result) == Slice(after, 10, 8));
  // Release: the next read fills the window again.
  window.Release();
  CHECK(ReadThrough(window, file.fd, 64, 16, &result) == Slice(after, 64, 16));
}

TEST_CASE("FileWindow: a moved-from window reads the file again") {
  const std::vector<uint8_t> bytes = Pattern(kWindow, 4);
  TempFile file(bytes);
  FileWindow window;
  FileRead result;
  CHECK(ReadThrough(window, file.fd, 0, 100, &result) == Slice(bytes, 0, 100));
  FileWindow moved = std::move(window);
  CHECK(ReadThrough(moved, file.fd, 50, 100, &result) == Slice(bytes, 50, 100));
  CHECK(ReadThrough(window, file.fd, 50, 100, &result) == Slice(bytes, 50, 100));
}

TEST_CASE("FileWindow reports a failed read with its errno, and an error past the bytes asked "
          "for is none") {
  FileWindow window;
  FileRead result;
  CHECK(ReadThrough(window, -1, 0, 16, &result).empty());
  CHECK(result.error == EBADF);
  // A directory's fd: pread fails with EISDIR at any offset.
  const int dir = ::open("/tmp", O_RDONLY | O_DIRECTORY);
  REQUIRE(dir >= 0);
  CHECK(ReadThrough(window, dir, 0, 16, &result).empty());
  CHECK(result.error == EISDIR);
  CHECK(ReadThrough(window, dir, 0, kWindow, &result).empty());
  CHECK(result.error == EISDIR);
  ::close(dir);
}

}  // namespace
}  // namespace ptscope::format
