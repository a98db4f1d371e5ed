// The ptrace side of pt-emulate: runs or attaches to the target, single-steps every thread,
// classifies each retired instruction and feeds the per-thread PtEncoderModel (or, with --cpus,
// the model of the virtual CPU the thread runs on), and turns what it observes (syscalls,
// clone/fork/exec/exit, signals, context switches) into sideband. Writes through CaptureWriter.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capture_writer.h"
#include "pt_source.h"
#include "cpu_scheduler.h"
#include "ground_truth.h"
#include "process_state.h"
#include "pt_encoder_model.h"
#include "ptscope/perf_time.h"
#include "stream_output.h"

namespace ptscope::emulate {

// pt-emulate's own options; the session's (output, target, --full, --trigger...) are in
// record::SessionOptions.
struct EmulateOptions {
  uint64_t snapshot_size = 4u << 20;  // 0: --full
  const record::TriggerSpec* trigger = nullptr;
  bool multi_snapshot = false;
  std::optional<record::TriggerSpec> start_at;  // --start-at, resolved as libraries load
  uint64_t max_instructions = 0;
  EncoderConfig encoder;
  double virtual_ghz = 1.0;
  bool follow_fork = false;
  uint32_t cpus = 0;            // 0: per-thread streams; N: N virtual CPUs, per-CPU streams
  uint64_t timeslice = 20000;   // per-CPU mode: instructions a thread runs before preemption
  // --clock real: a syscall's step adds the real time it took (less a plain step's cost) to the
  // virtual clock. Default (virtual): only instructions advance it, so runs are repeatable.
  bool real_clock = false;
};

// Virtual clock ↔ perf time: ns = zero + (tsc * mult) >> shift, as perf converts TSC.
struct TimeConversion {
  uint16_t shift = 20;
  uint32_t mult = 1u << 20;
  uint64_t zero = 0;
  uint64_t ToNs(uint64_t tsc) const { return perf::PerfTime{shift, mult, zero}.TscToNs(tsc); }
};

// The ground truth (tools/ptgen): one "TID 0xADDRESS" line per traced instruction.
using GroundTruthWriter = ptgen::GroundTruthWriter;

struct TraceSummary {
  uint64_t instructions = 0;
  uint64_t threads = 0;
  uint64_t pt_bytes = 0;
  uint64_t snapshots = 0;
  uint64_t unexpected_flow = 0;  // next ip impossible for the instruction: encoded as async
  double seconds = 0;
};

// The PTRACE_O_* options the tracer works with.
unsigned PtraceOptionsFor(const EmulateOptions& options);

// PTRACE_SEIZEs every thread of process `pid` (and interrupts it), listing the threads again
// until no new one appeared; a thread that exits meanwhile is skipped. For attach mode.
Result<std::vector<int>> SeizeThreads(pid_t pid, unsigned ptrace_options);

class Tracer {
 public:
  static constexpr uint64_t kTscBase = 1000000000;  // the virtual clock starts here

  Tracer(const EmulateOptions& options, record::CaptureWriter* writer, GroundTruthWriter* truth,
         TimeConversion time);
  ~Tracer();

  // PTRACE_O_* for a launched program (record::Target seizes it with them).
  unsigned PtraceOptions() const;
  // A launched program, seized and stopped at its exec.
  Status AdoptLaunched(pid_t pid);
  // An attached process whose threads SeizeThreads() seized.
  Status AdoptAttached(pid_t pid, const std::vector<int>& tids);
  // Steps the threads until `deadline_ns`, until a session signal arrives, or until the trigger
  // fires (the thread that hit it stays stopped until the next call) or --max-instructions is
  // reached (then no thread is resumed any more).
  Result<record::SourceEvents> Run(uint64_t deadline_ns);
  // Writes every stream's ring as snapshot `index`. `final`: tracing stops with it (at the
  // trigger: right there; otherwise once every thread's step in flight has completed).
  Status Snapshot(uint32_t index, bool final);
  // Stops tracing, detaches every thread (they go on untraced), writes what is buffered.
  Status Finish();
  // What the user should know about a capture that still completed (--start-at never reached).
  std::vector<std::string> TakeWarnings() { return std::move(warnings_); }
  // Finish() without writing: after an error, leave the target running. Best effort.
  void Abort();
  uint64_t clock() const { return clock_; }
  const TraceSummary& summary() const { return summary_; }

 private:
  struct Thread {
    pid_t tid = 0;
    pid_t pid = 0;
    ProcessState* process = nullptr;
    std::unique_ptr<StreamOutput> output;     // per-thread mode only
    std::unique_ptr<PtEncoderModel> own_model;  // per-thread mode only
    PtEncoderModel* model = nullptr;  // own_model, or the CPU's model while on a virtual CPU
    uint64_t ip = 0;           // next instruction to execute (rip at the last stop)
    bool started = false;      // has had its first stop
    bool running = false;      // resumed, no stop reported yet
    bool exec_trap = false;    // the syscall-exit trap after an exec retires nothing
    bool resync = false;       // stopped inside a syscall: take the next stop's ip as the start
    bool exited = false;
    int injected = 0;          // signal passed at the last resume
    bool injected_caught = false;
    int pending_signal = 0;    // to pass on when detaching
    user_regs_struct regs{};
    uint64_t retired = 0;      // instructions this thread retired
    // Per-CPU mode (tracer_percpu.cpp):
    int cpu = -1;              // the virtual CPU it runs on, -1 when off every CPU
    int last_cpu = -1;
    uint64_t slice_start = 0;  // `retired` when it was placed on its CPU
    bool syscall_done = false; // its syscall retired at entry: the next stop only resyncs
    uint64_t resumed_ns = 0;   // CLOCK_MONOTONIC of its last step on a CPU
    bool stuck = false;        // switched out because its step did not come back (page fault)
    bool step_pending = false; // that step completed off-CPU: it retires when back on a CPU
    uint64_t step_ns = 0;      // --clock real: CLOCK_MONOTONIC when its step was requested
  };

  // One virtual CPU of --cpus: its PT stream and the thread on it (nullptr: idle).
  struct VirtualCpu {
    std::unique_ptr<StreamOutput> output;
    std::unique_ptr<PtEncoderModel> model;
    Thread* current = nullptr;
  };

  Status HandleStop(pid_t tid, int status);
  Status HandleStepTrap(Thread& t);
  Status HandleEvent(Thread& t, int event);
  Status OnExec(Thread& t, pid_t former_tid);
  Status OnSyscallRetired(Thread& t, uint64_t nr);
  Status OnThreadExit(Thread& t);
  Status StartProcess(pid_t pid, pid_t tid, bool exec);
  Thread& AddThread(pid_t tid, pid_t pid);
  ProcessState* Process(pid_t pid);
  void Resume(Thread& t, int signal);
  Status TakeSnapshot(uint32_t index);
  void BeginStop();
  // Waits (handling stops) until no thread runs.
  Status Quiesce();
  Result<bool> WaitAndHandle();
  Status DetachAll();
  void DrainStepTrap(Thread& t);
  Status WriteTimeSync();
  // Hands what was traced so far to the archive: the ground truth first (so that it always holds
  // every instruction the PT written after it describes), then full mode's PT pieces, the time
  // sync pairs and the sideband. A killed pt-emulate loses only what came after.
  Status FlushOutputs();
  uint64_t ResolveTrigger(ProcessState& process) const;
  Status ArmStartAt(ProcessState& process, Thread& t);
  Status OnUntracedSyscallStop(Thread& t);
  Status CheckDeferred();
  void SampleTimeSync();
  void CountRetired(Thread& t);
  void AddRealTime(Thread& t, bool syscall, uint64_t retired_at);
  Status CheckLimits();
  uint64_t Ns() const { return time_.ToNs(clock_); }

  // Per-CPU mode (tracer_percpu.cpp).
  bool per_cpu() const { return !cpus_.empty(); }
  void CreateCpus();
  Status HandleOffCpuStop(Thread& t, int status);
  Status OpenSigchldFd();
  pid_t WaitPerCpu(int* status);
  void SwitchOutStuck();
  Status OnSyscallEntry(Thread& t);
  void ResumeOnCpu(Thread& t, int signal);
  Status Park(Thread& t);
  Status SwitchOut(int cpu, bool preempt);
  Status DispatchIdle(int after, bool skip_after);
  Status SwitchTo(int cpu, Thread* prev, Thread* next, bool preempt);
  Thread* PickNext(int cpu);
  void Unqueue(Thread& t);
  Status ReleaseCpu(Thread& t);
  Status WriteSwitch(int cpu, const Thread* prev, const Thread* next, bool preempt);
  template <typename Fn> Status ForEachStream(Fn fn);

  EmulateOptions options_;
  record::CaptureWriter* writer_;
  GroundTruthWriter* truth_;
  TimeConversion time_;
  std::map<pid_t, std::unique_ptr<Thread>> threads_;
  std::vector<std::unique_ptr<Thread>> finished_;  // exited threads keep their streams
  std::map<pid_t, std::unique_ptr<ProcessState>> processes_;
  uint64_t clock_ = kTscBase;
  uint32_t next_stream_id_ = 1;
  bool stepping_ = true;    // false until --start-at's breakpoint is hit
  bool stopping_ = false;   // detaching: resume nothing, detach when all are stopped
  bool trigger_done_ = false;
  // The trigger fired and the session has not acted on it yet: `trigger_thread_` waits, stopped,
  // with the signal it is to be resumed with.
  bool trigger_pending_ = false;
  Thread* trigger_thread_ = nullptr;
  int trigger_signal_ = 0;
  uint64_t trigger_ip_ = 0;
  bool limit_reached_ = false;
  // The trigger's snapshot or --max-instructions ended the capture: a thread whose single step
  // was in flight then completes it afterwards, but its trace stopped before that instruction,
  // so neither the PT nor the ground truth gets it (--max-instructions N is exactly N).
  bool capture_ended_ = false;
  bool done_ = false;  // Finish() or Abort() ran
  uint64_t started_ns_ = 0;  // CLOCK_MONOTONIC when tracing began (summary: seconds)
  std::vector<std::pair<uint64_t, uint64_t>> time_sync_;  // (virtual tsc, CLOCK_MONOTONIC ns)
  size_t time_sync_written_ = 0;
  // --start-at: until its address is known the process runs with PTRACE_SYSCALL, and every
  // mapping change retries the resolution (libraries load after exec); then an int3 waits there
  // and the process runs with PTRACE_CONT.
  uint64_t start_at_address_ = 0;  // where the int3 is (0: not armed)
  long start_at_saved_word_ = 0;
  pid_t start_at_pid_ = 0;
  std::string start_at_where_;     // "write in /usr/lib/x86_64-linux-gnu/libc.so.6"
  std::string start_at_error_;     // why the last resolution failed
  std::vector<std::string> warnings_;
  uint64_t next_time_sync_ = 0;
  uint64_t step_cost_ns_ = 0;  // --clock real: running average of a plain step's real time
  uint64_t deferred_checked_at_ = 0;
  pid_t launched_pid_ = 0;
  TraceSummary summary_;
  std::vector<VirtualCpu> cpus_;
  std::unique_ptr<CpuScheduler> scheduler_;  // per-CPU mode: the run queue and who runs where
  bool itrace_started_ = false;
  Status first_status_ = Ok();  // an error met where none can be returned (inside Resume)
  int sigchld_fd_ = -1;          // per-CPU mode: signalfd for SIGCHLD (waits with a timeout)
};

// Every PT stream: the virtual CPUs' (per-CPU mode) or the threads' (per-thread mode).
template <typename Fn>
Status Tracer::ForEachStream(Fn fn) {
  for (auto& cpu : cpus_) PTSCOPE_TRY(fn(*cpu.model, *cpu.output));
  for (auto& [tid, t] : threads_) {
    if (t->output) PTSCOPE_TRY(fn(*t->own_model, *t->output));
  }
  for (auto& t : finished_) {
    if (t->output) PTSCOPE_TRY(fn(*t->own_model, *t->output));
  }
  return Ok();
}

}  // namespace ptscope::emulate
