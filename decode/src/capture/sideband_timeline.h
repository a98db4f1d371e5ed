// The archive's sideband (raw perf records) turned into process address spaces over time and
// thread/process names: MMAP/MMAP2 add executable mappings, COMM with exec clears, FORK copies.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "capture/cpu_schedule.h"
#include "events.h"
#include "ptscope/format.h"
#include "ptscope/perf_records.h"
#include "ptscope/symbols.h"

namespace ptscope::decode {

class SidebandTimeline {
 public:
  // Never fails: malformed records end their chunk and are counted in notes(). Schedule runs
  // past `held_runs` are looked up from their chunks read again (cpu_schedule.h) when the
  // archive was read without its sideband bytes (format::ReadOptions::keep_sideband_bytes);
  // otherwise they are held (the records themselves are, and take more).
  static SidebandTimeline Build(const format::Archive& archive,
                                size_t held_runs = CpuSchedule::kHeldRuns);

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
  // Sideband chunks that could not be read again (the file changed or went away since it was
  // opened): while building, or later when the schedule needed one. Their records are missing.
  size_t unread_chunks() const { return unread_ + schedule_.unread_chunks(); }
  // Whether some CPU's schedule is looked up from chunks read again (for tests).
  bool schedule_streamed() const { return schedule_.streamed(); }

 private:
  // The distinct pids or tids (`field`) of the threads seen running on some CPU, sorted.
  std::vector<uint32_t> Scheduled(uint32_t ThreadKey::*field) const;
  void Apply(const perf::Record& record, uint64_t time_ns);
  // Whether `record` is a schedule record, and which run it makes, on which CPU.
  static bool ScheduleRun(const perf::Record& record, CpuSchedule::CpuRun* run);
  symbols::AddressSpace address_space_;
  std::map<uint32_t, std::string> thread_names_;
  std::map<uint32_t, uint32_t> pid_of_tid_;
  CpuSchedule schedule_;
  uint64_t records_ = 0;
  size_t unread_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace ptscope::decode
