#include "synth_cpus.h"

#include <thread>
#include <utility>

namespace ptscope::synth {

class SynthCpus::Seat : public CpuPlacement {
 public:
  Seat(SynthCpus* cpus, size_t index) : cpus_(cpus), index_(index) {}
  ptgen::PtPacketEncoder* Run(uint64_t ready_tsc, uint64_t* start_tsc) override {
    return cpus_->Run(index_, ready_tsc, start_tsc);
  }
  void Left(uint64_t tsc, bool exited) override { cpus_->Left(index_, tsc, exited); }

 private:
  SynthCpus* cpus_;
  size_t index_;
};

SynthCpus::SynthCpus(std::vector<ptgen::PtPacketEncoder*> encoders, size_t threads, uint32_t pid,
                     uint32_t first_tid, uint64_t start_tsc, uint64_t timeslice,
                     uint64_t ticks_per_mtc)
    : threads_(threads), pid_(pid), first_tid_(first_tid), timeslice_(timeslice),
      ticks_per_mtc_(ticks_per_mtc) {
  for (ptgen::PtPacketEncoder* encoder : encoders) cpus_.push_back(Cpu{encoder, start_tsc});
  for (size_t i = 0; i < threads; ++i) seats_.push_back(std::make_unique<Seat>(this, i));
}

SynthCpus::~SynthCpus() = default;

CpuPlacement* SynthCpus::placement(size_t index) { return seats_[index].get(); }

void SynthCpus::Schedule(const std::function<void(size_t)>& walk) {
  std::vector<std::thread> workers;
  for (size_t i = 0; i < threads_.size(); ++i) {
    workers.emplace_back([this, &walk, i] {
      walk(i);
      std::lock_guard lock(mutex_);
      threads_[i].state = ThreadState::State::kDone;
      running_ = kIdle;
      changed_.notify_all();
    });
  }
  {
    std::unique_lock lock(mutex_);
    for (;;) {
      // Every walk either waits for a CPU or is done, and none runs: the next one goes.
      changed_.wait(lock, [this] {
        if (running_ != kIdle) return false;
        for (const ThreadState& t : threads_) {
          if (t.state == ThreadState::State::kStarting) return false;
        }
        return true;
      });
      size_t next = kIdle;
      for (size_t i = 0; i < threads_.size(); ++i) {
        if (threads_[i].state != ThreadState::State::kWaiting) continue;
        if (next == kIdle || threads_[i].ready_at < threads_[next].ready_at) next = i;
      }
      if (next == kIdle) break;  // all done
      size_t cpu = 0;
      for (size_t c = 1; c < cpus_.size(); ++c) {
        if (cpus_[c].free_at < cpus_[cpu].free_at) cpu = c;
      }
      ThreadState& t = threads_[next];
      uint64_t start = std::max(t.ready_at, cpus_[cpu].free_at) + 1;
      // The switch-in records at start - 1; with MTC timing (no CYC) the thread's first
      // packets wait for the next MTC edge, the first time a decoder can tell is after them.
      if (ticks_per_mtc_ != 0) start = (start / ticks_per_mtc_ + 1) * ticks_per_mtc_ + 1;
      AddSwitch(static_cast<int>(cpu), start - 1, kIdle, next);
      t.cpu = static_cast<int>(cpu);
      t.start = t.slice_start = start;
      t.state = ThreadState::State::kRunning;
      running_ = next;
      changed_.notify_all();
    }
  }
  for (std::thread& worker : workers) worker.join();
}

ptgen::PtPacketEncoder* SynthCpus::Run(size_t index, uint64_t ready_tsc, uint64_t* start_tsc) {
  std::unique_lock lock(mutex_);
  ThreadState& t = threads_[index];
  if (t.cpu >= 0) {  // back from a syscall, on the CPU it kept
    if (ready_tsc - t.slice_start < timeslice_) {
      *start_tsc = ready_tsc;
      return cpus_[static_cast<size_t>(t.cpu)].encoder;
    }
    Release(index, t.left_at);
  }
  t.state = ThreadState::State::kWaiting;
  t.ready_at = ready_tsc;
  running_ = kIdle;
  changed_.notify_all();
  changed_.wait(lock, [this, index] { return running_ == index; });
  *start_tsc = t.start;
  return cpus_[static_cast<size_t>(t.cpu)].encoder;
}

void SynthCpus::Left(size_t index, uint64_t tsc, bool exited) {
  std::lock_guard lock(mutex_);
  threads_[index].left_at = tsc;
  if (exited && threads_[index].cpu >= 0) Release(index, tsc);
}

// Thread `index` leaves its CPU after its TIP.PGD at `tsc`: the switch to the idle task at
// tsc + 2 (after the EXIT record at tsc + 1 of a thread that ends), the CPU free after it.
void SynthCpus::Release(size_t index, uint64_t tsc) {
  ThreadState& t = threads_[index];
  Cpu& cpu = cpus_[static_cast<size_t>(t.cpu)];
  AddSwitch(t.cpu, tsc + 2, index, kIdle);
  cpu.free_at = tsc + 3;
  t.cpu = -1;
}

// perf's pair for one switch on `cpu`: the switch-out record of `prev` naming `next`, then the
// switch-in record of `next` naming `prev` (kIdle: the idle task, pid/tid 0).
void SynthCpus::AddSwitch(int cpu, uint64_t time, size_t prev, size_t next) {
  const uint32_t prev_tid = TidOf(prev), next_tid = TidOf(next);
  const uint32_t prev_pid = prev == kIdle ? 0 : pid_, next_pid = next == kIdle ? 0 : pid_;
  auto add = [&](uint32_t pid, uint32_t tid, perf::SwitchRecord body) {
    SwitchSideband& entry = sideband_.emplace_back();  // (filled in place: GCC 12 misreads a
    entry.time = time;                                 // moved variant as uninitialized)
    entry.pid = pid;
    entry.tid = tid;
    entry.cpu = static_cast<uint32_t>(cpu);
    entry.record.type = perf::kRecordSwitchCpuWide;
    entry.record.body = body;
  };
  add(prev_pid, prev_tid, perf::SwitchRecord{true, false, true, next_pid, next_tid});
  add(next_pid, next_tid, perf::SwitchRecord{false, false, true, prev_pid, prev_tid});
  if (next != kIdle) ++switch_ins_;
}

}  // namespace ptscope::synth
