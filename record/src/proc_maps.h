// /proc/PID/maps and /proc/PID/task: the address space and threads of a live process, as the
// recorders see them when they attach (synthesized MMAP2/COMM records, vdso location, trigger
// address resolution).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::record {

// One line of /proc/PID/maps.
struct MapEntry {
  uint64_t start = 0;
  uint64_t end = 0;      // exclusive
  bool read = false;
  bool write = false;
  bool exec = false;
  bool shared = false;   // 's' in the perms field (else 'p', private)
  uint64_t offset = 0;   // file offset of `start`
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  std::string path;      // "" for anonymous, "[vdso]", "[stack]", or a file path (may hold spaces)
  bool deleted = false;  // the kernel appended " (deleted)"; stripped from `path`

  uint64_t size() const { return end - start; }
  // PROT_READ|PROT_WRITE|PROT_EXEC bits as in mmap(2) / PERF_RECORD_MMAP2.prot.
  uint32_t prot() const;
  // True for mappings backed by a file on disk (path starts with '/').
  bool is_file() const { return !path.empty() && path[0] == '/'; }
  bool is_vdso() const { return path == "[vdso]"; }
};

// Parses the text of a maps file. `source` names it in error messages ("/proc/123/maps").
Result<std::vector<MapEntry>> ParseProcMaps(std::string_view text, std::string_view source);

// Reads and parses /proc/PID/maps (pid 0 = the calling process).
Result<std::vector<MapEntry>> ReadProcMaps(int pid);

// The thread ids of a process from /proc/PID/task, ascending (pid 0 = the calling process).
Result<std::vector<int>> ListThreads(int pid);

// Every process id in /proc, ascending (processes that vanish meanwhile are simply listed).
std::vector<int> ListProcesses();

// The online CPUs from /sys/devices/system/cpu/online ("0-3,6").
Result<std::vector<int>> OnlineCpus();

// The executable of process `pid` (/proc/PID/exe, without the kernel's " (deleted)" suffix).
Result<std::string> ProcessExePath(int pid);

// The first "[vdso]" mapping, or nullptr.
const MapEntry* FindVdso(const std::vector<MapEntry>& maps);

// The mapping containing `address`, or nullptr.
const MapEntry* FindMapping(const std::vector<MapEntry>& maps, uint64_t address);

// Reads a whole small text file from /proc or /sys (these report size 0, so stat cannot be used).
Result<std::string> ReadProcFile(const std::string& path);

// "/proc/PID" or "/proc/self" for pid 0.
std::string ProcDir(int pid);

}  // namespace ptscope::record
