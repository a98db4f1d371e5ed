// The archive's sideband (raw perf records) turned into process address spaces over time and
// thread/process names: MMAP/MMAP2 add executable mappings, COMM with exec clears, FORK copies.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "events.h"
#include "ptscope/format.h"
#include "ptscope/perf_records.h"
#include "ptscope/symbols.h"

namespace ptscope::decode {

class SidebandTimeline {
 public:
  // Never fails: malformed records end their chunk and are counted in notes().
  static SidebandTimeline Build(const format::Archive& archive);

  const symbols::AddressSpace& address_space() const { return address_space_; }
  symbols::AddressSpace& address_space() { return address_space_; }
  std::string ProcessName(uint32_t pid) const;
  std::string ThreadName(uint32_t tid) const;
  // Pid of a thread when the sideband names it (FORK/COMM), else 0.
  uint32_t PidOf(uint32_t tid) const;
  // The thread running on `cpu` at `time_ns` per the SWITCH/SWITCH_CPU_WIDE/ITRACE_START records
  // (per-CPU traces); {0, 0} when none is known (idle or before the first record).
  // `since_ns` (optional) receives when that stretch began (its switch-in; 0 before the first
  // record): the same thread switched in again on the CPU is a new stretch, since between the
  // two it may have run on other CPUs.
  ThreadKey ThreadOnCpu(uint32_t cpu, uint64_t time_ns, uint64_t* since_ns = nullptr) const;
  // Every process seen running on some CPU (their images must be prepared).
  std::vector<uint32_t> ScheduledPids() const;
  // Every thread seen running on some CPU, sorted by (pid, tid).
  std::vector<ThreadKey> ScheduledThreads() const;
  // How many distinct threads the schedule shows running on some CPU.
  size_t ScheduledThreadCount() const;
  uint64_t records() const { return records_; }
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  // The distinct pids or tids (`field`) of the threads seen running on some CPU, sorted.
  std::vector<uint32_t> Scheduled(uint32_t ThreadKey::*field) const;
  void Apply(const perf::Record& record, uint64_t time_ns);
  bool Schedule(const perf::Record& record, uint64_t time_ns);  // true: a schedule record
  struct CpuRun {
    uint64_t from_ns;
    ThreadKey thread;
  };
  symbols::AddressSpace address_space_;
  std::map<uint32_t, std::string> thread_names_;
  std::map<uint32_t, uint32_t> pid_of_tid_;
  std::map<uint32_t, std::vector<CpuRun>> runs_by_cpu_;  // in time order
  uint64_t records_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace ptscope::decode
