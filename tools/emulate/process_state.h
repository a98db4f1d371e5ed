// What pt-emulate tracks per traced process: its mappings (to emit MMAP2 for new executable
// mappings), the decoded-instruction cache, a /proc/PID/mem handle for code bytes, and the
// --trigger address in this address space.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capture_writer.h"
#include "insn_classifier.h"
#include "proc_maps.h"

namespace ptscope::emulate {

class ProcessState {
 public:
  explicit ProcessState(pid_t pid) : pid_(pid) {}
  ~ProcessState();
  ProcessState(const ProcessState&) = delete;
  ProcessState& operator=(const ProcessState&) = delete;

  pid_t pid() const { return pid_; }
  // (Re)opens /proc/PID/mem (after exec the old handle sees the old address space).
  Status OpenMemory();
  // The classified instruction at `ip` (decoded on first use). size == 0: unreadable/undecodable.
  const ClassifiedInsn& Instruction(uint64_t ip);

  // Re-reads /proc/PID/maps; emits MMAP2 (and modules) for executable mappings that are new or
  // changed, drops cached decodes when executable mappings changed. `all` re-emits every
  // executable mapping (initial state, exec).
  Status RefreshMaps(record::CaptureWriter* writer, pid_t tid, uint64_t time_ns, bool all);
  const std::vector<record::MapEntry>& maps() const { return maps_; }
  // jit-PID.dump files the process mapped (perf's convention for finding them).
  const std::vector<std::string>& jitdumps() const { return jitdumps_; }

  // Is `signal` handled by a user handler right now (SigCgt of /proc/PID/status)?
  bool SignalCaught(int signal) const;

  InsnCache& cache() { return cache_; }
  std::string comm;
  uint64_t trigger_address = 0;  // --trigger resolved in this address space (0: not yet)

 private:
  pid_t pid_;
  int mem_fd_ = -1;
  InsnCache cache_;
  std::vector<record::MapEntry> maps_;
  std::vector<std::string> jitdumps_;
};

}  // namespace ptscope::emulate
