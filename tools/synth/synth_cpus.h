// pt-synth --cpus N: the walks of every thread scheduled on N virtual CPUs, each CPU one PT
// stream, with the context-switch sideband `perf record -a` writes (PERF_RECORD_SWITCH_CPU_WIDE),
// as pt-emulate --cpus does for real programs; so that per-CPU decoding can be measured on
// captures of any length.
//
// Each walk runs on a thread of its own, but only one at a time: a walk blocks in
// CpuPlacement::Run until the scheduler (Schedule, on the calling thread) gives it a CPU, so the
// capture is the same on every run. Policy: a thread keeps its CPU through a syscall, library
// call or restart until it has run `timeslice` ticks there (1 instruction = 1 tick), then leaves
// it at the next one of these;
// a free CPU takes the waiting thread that was ready first (ties: the lower thread index), and a
// ready thread the CPU that was free first (ties: the lower CPU). Timing as pt-emulate's: a
// switch's records lie strictly between the packets of the thread before and after it; with
// MTC timing and no CYC a thread starts after the next MTC edge, so a decoder can tell the
// switch's side of every packet.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ptscope/perf_records.h"
#include "walker.h"

namespace ptscope::synth {

// One sideband record of the switches, in the order the capture must hold them (time, then
// the order they were made in).
struct SwitchSideband {
  uint64_t time = 0;
  uint32_t pid = 0, tid = 0, cpu = 0;
  perf::Record record;
};

class SynthCpus {
 public:
  // `encoders[c]`: CPU c's stream. `ticks_per_mtc`: 0 unless the timing is MTC without CYC.
  SynthCpus(std::vector<ptgen::PtPacketEncoder*> encoders, size_t threads, uint32_t pid,
            uint32_t first_tid, uint64_t start_tsc, uint64_t timeslice, uint64_t ticks_per_mtc);
  ~SynthCpus();

  // Thread `index`'s placement, for its WalkOptions.
  CpuPlacement* placement(size_t index);
  // Runs walk(i) for every thread i, each on a thread of its own, one at a time as scheduled.
  // Returns once every walk has returned.
  void Schedule(const std::function<void(size_t)>& walk);

  const std::vector<SwitchSideband>& sideband() const { return sideband_; }
  uint64_t switch_ins() const { return switch_ins_; }  // times a thread was put on a CPU

 private:
  class Seat;
  struct Cpu {
    ptgen::PtPacketEncoder* encoder;
    uint64_t free_at = 0;  // no thread before this time
  };
  struct ThreadState {
    enum class State { kStarting, kWaiting, kRunning, kDone } state = State::kStarting;
    uint64_t ready_at = 0, start = 0, slice_start = 0;
    uint64_t left_at = 0;  // its last TIP.PGD
    int cpu = -1;          // the CPU it holds (through a syscall too), -1: none
  };

  ptgen::PtPacketEncoder* Run(size_t index, uint64_t ready_tsc, uint64_t* start_tsc);
  void Left(size_t index, uint64_t tsc, bool exited);
  void Release(size_t index, uint64_t tsc);  // (locked)
  void PlaceNext();                          // (locked)
  void AddSwitch(int cpu, uint64_t time, size_t prev, size_t next);
  uint32_t TidOf(size_t index) const { return index == kIdle ? 0 : first_tid_ + static_cast<uint32_t>(index); }

  static constexpr size_t kIdle = ~size_t{0};
  std::vector<Cpu> cpus_;
  std::vector<ThreadState> threads_;
  std::vector<std::unique_ptr<Seat>> seats_;
  uint32_t pid_, first_tid_;
  uint64_t timeslice_, ticks_per_mtc_;
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t running_ = kIdle;  // the one thread that may walk now
  std::vector<SwitchSideband> sideband_;
  uint64_t switch_ins_ = 0;
};

}  // namespace ptscope::synth
