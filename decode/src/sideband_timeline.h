// The archive's sideband (raw perf records) turned into process address spaces over time and
// thread/process names: MMAP/MMAP2 add executable mappings, COMM with exec clears, FORK copies.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

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
  uint64_t records() const { return records_; }
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  void Apply(const perf::Record& record, uint64_t time_ns);
  symbols::AddressSpace address_space_;
  std::map<uint32_t, std::string> thread_names_;
  std::map<uint32_t, uint32_t> pid_of_tid_;
  uint64_t records_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace ptscope::decode
