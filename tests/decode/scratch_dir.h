// Tests of decode's scratch files (temp_file.h): TMPDIR pointed at a fresh directory, and the
// descriptor of the file a decode opened there.
#pragma once

#include <dirent.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace ptscope::decode {

// The descriptor of the spill file, found by its directory (/proc/self/fd names it).
inline int SpillFd(const std::string& dir) {
  DIR* fds = opendir("/proc/self/fd");
  REQUIRE(fds != nullptr);
  int found = -1;
  while (dirent* entry = readdir(fds)) {
    char target[4096];
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::string(target).rfind(dir + "/", 0) == 0) found = std::atoi(entry->d_name);
  }
  closedir(fds);
  return found;
}

// Sets TMPDIR to a fresh directory for its lifetime.
struct SpillDir {
  SpillDir() {
    char tmpl[] = "/tmp/ptscope-spill-test.XXXXXX";
    path = mkdtemp(tmpl);
    const char* before = std::getenv("TMPDIR");
    had = before != nullptr;
    if (had) saved = before;
    setenv("TMPDIR", path.c_str(), 1);
  }
  ~SpillDir() {
    if (had) {
      setenv("TMPDIR", saved.c_str(), 1);
    } else {
      unsetenv("TMPDIR");
    }
    rmdir(path.c_str());
  }
  std::string path, saved;
  bool had = false;
};

}  // namespace ptscope::decode
