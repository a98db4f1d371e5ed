// Small /proc and clock helpers shared by tracer.cpp and tracer_loop.cpp.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string>

#include "proc_maps.h"

namespace ptscope::emulate {

// Syscalls after which the address space may have changed.
inline bool ChangesMappings(uint64_t nr) {
  switch (nr) {
    case 9: case 10: case 11: case 12: case 25:  // mmap mprotect munmap brk mremap
    case 30: case 67: case 216: case 329:        // shmat shmdt remap_file_pages pkey_mprotect
      return true;
    default:
      return false;
  }
}

inline uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000 + static_cast<uint64_t>(ts.tv_nsec);
}

inline std::string Comm(pid_t pid, pid_t tid) {
  auto text = record::ReadProcFile(record::ProcDir(pid) + "/task/" + std::to_string(tid) + "/comm");
  if (!text) return "";
  std::string comm = *text;
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

inline pid_t Tgid(pid_t tid) {
  auto text = record::ReadProcFile(record::ProcDir(tid) + "/status");
  if (!text) return tid;
  const size_t at = text->find("Tgid:");
  return at == std::string::npos ? tid : static_cast<pid_t>(std::atoi(text->c_str() + at + 5));
}

}  // namespace ptscope::emulate
