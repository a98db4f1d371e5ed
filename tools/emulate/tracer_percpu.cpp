// pt-emulate --cpus N: N virtual CPUs, each with its own PT encoder and stream, as
// `perf record -a -e intel_pt//u` writes them, plus the context-switch sideband perf writes with
// context_switch=1 (PERF_RECORD_SWITCH_CPU_WIDE on every CPU).
//
// Only the threads placed on a virtual CPU are single-stepped. A thread runs for up to
// --timeslice of its own instructions and is then preempted; CpuScheduler (cpu_scheduler.h)
// decides, deterministically, who runs next where: threads migrate, and every runnable thread
// eventually runs. A thread about to execute a syscall is resumed
// with PTRACE_SYSCALL; at its entry stop the syscall retires on the CPU (TIP.PGD, as user-only
// tracing ends there), the thread is switched out and continues off-CPU with PTRACE_SINGLESTEP,
// which stops again before its next user instruction. A thread blocked in the kernel therefore
// never holds a CPU, and the program cannot deadlock on our scheduling: everything that can run
// user code waits only for a CPU, and CPUs are given out in FIFO order.
//
// Timing: a context switch costs 2 ticks of the virtual clock, so the previous thread's packets
// (at most the switch time - 1) are strictly before the switch records, and the next thread's
// (at least the switch time + 1) strictly after: perf assigns instructions to threads by
// comparing their timestamps with the switch records'. With --timing mtc a switch lasts until the
// next MTC edge; with --timing tsc or none only PSBs carry time, and a decoder cannot place
// switches exactly (as on hardware).
#include <poll.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "tracer.h"
#include "tracer_util.h"

namespace ptscope::emulate {
namespace {

// A step that has not come back after this long is blocked (a page fault waiting on
// userfaultfd, say): its thread leaves the CPU as a kernel would switch it out. A busy host can
// delay a step that long too; switching such a thread out is harmless, only less regular.
constexpr uint64_t kStuckStepNs = 100'000'000;
constexpr int kWatchdogMs = 50;

}  // namespace

void Tracer::CreateCpus() {
  cpus_.resize(options_.cpus);
  scheduler_ = std::make_unique<CpuScheduler>(options_.cpus);
  for (uint32_t c = 0; c < options_.cpus; ++c) {
    cpus_[c].output = std::make_unique<StreamOutput>(writer_, next_stream_id_++, 0, 0,
                                                     options_.snapshot_size,
                                                     static_cast<int32_t>(c));
    cpus_[c].model = std::make_unique<PtEncoderModel>(options_.encoder, cpus_[c].output.get());
  }
}

// SIGCHLD (sent for every tracee stop) is read from a signalfd, so the wait can time out. Blocked
// only from here on: children forked earlier (the launched program) keep the default mask.
Status Tracer::OpenSigchldFd() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0)
    return MakeError(Errc::kInternal, std::string("cannot block SIGCHLD: ") + std::strerror(errno));
  sigchld_fd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigchld_fd_ < 0)
    return MakeError(Errc::kInternal, std::string("signalfd failed: ") + std::strerror(errno));
  return Ok();
}

// waitpid(-1) that also wakes every kWatchdogMs to switch out threads whose step does not come
// back, so that a thread blocked outside a syscall cannot hold a CPU another thread needs (e.g.
// the one that would resolve its page fault). Returns -1 with errno EINTR to let Run() look at
// its flags.
pid_t Tracer::WaitPerCpu(int* status) {
  for (;;) {
    const pid_t tid = waitpid(-1, status, __WALL | WNOHANG);
    if (tid != 0) return tid;
    pollfd fd{sigchld_fd_, POLLIN, 0};
    const int ready = poll(&fd, 1, kWatchdogMs);
    if (ready < 0) return -1;  // EINTR: a stop or snapshot request
    signalfd_siginfo info;
    while (read(sigchld_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    }
    if (ready == 0 && !stopping_) {
      SwitchOutStuck();
      if (!first_status_) {
        errno = EINTR;
        return -1;
      }
    }
  }
}

void Tracer::SwitchOutStuck() {
  const uint64_t now = MonotonicNs();
  for (size_t c = 0; c < cpus_.size(); ++c) {
    Thread* t = cpus_[c].current;
    if (!t || !t->running || now - t->resumed_ns < kStuckStepNs) continue;
    t->stuck = true;  // FUP(ip) + TIP.PGD: its instruction has not retired
    if (Status status = SwitchOut(static_cast<int>(c), false); !status && first_status_)
      first_status_ = status;
  }
}

// A stop of a thread that is on no CPU. Such a thread was resumed only inside the kernel
// (syscall, event or signal stop), so this stop comes before its next user instruction.
Status Tracer::HandleOffCpuStop(Thread& t, int status) {
  const int sig = WSTOPSIG(status);
  const int event = status >> 16;
  if (event == PTRACE_EVENT_EXIT) {
    Unqueue(t);
    PTSCOPE_TRY(OnThreadExit(t));
    if (ptrace(PTRACE_CONT, t.tid, nullptr, nullptr) == 0) t.running = true;
    return Ok();
  }
  if (event == PTRACE_EVENT_STOP) {
    ptrace(PTRACE_GETREGS, t.tid, nullptr, &t.regs);
    t.ip = t.regs.rip;
    t.started = true;
    t.stuck = false;  // interrupted before its step completed: it runs that instruction again
    if (static_cast<int64_t>(t.regs.orig_rax) >= 0) {  // inside a syscall: run it to user mode
      t.resync = true;
      Resume(t, 0);
      return Ok();
    }
    return Park(t);  // at a user instruction (attach, interrupt)
  }
  if (event != 0) return HandleEvent(t, event);  // clone, exec: continues in the kernel
  if (sig != SIGTRAP) {
    Resume(t, sig);  // a signal for the target, delivered on the way back to user mode
    return Ok();
  }
  if (t.stuck) {
    t.stuck = false;
    if (!t.injected_caught) {  // its instruction completed after all: it retires on a CPU
      t.step_pending = true;
      return Park(t);
    }
  }
  // Back at a user instruction, nothing retired since the last stop: the syscall (already
  // encoded at its entry) completed, or a signal handler's frame was set up.
  ptrace(PTRACE_GETREGS, t.tid, nullptr, &t.regs);
  if (t.syscall_done) {
    t.syscall_done = false;
    PTSCOPE_TRY(OnSyscallRetired(t, t.regs.orig_rax));
  }
  t.ip = t.regs.rip;
  t.resync = false;
  t.exec_trap = false;
  t.injected = 0;
  t.injected_caught = false;
  return Park(t);
}

// PTRACE_SYSCALL stopped an on-CPU thread at a syscall's entry: the syscall retires here, on its
// CPU, and the thread leaves the CPU for as long as it is in the kernel.
Status Tracer::OnSyscallEntry(Thread& t) {
  if (capture_ended_) return Ok();  // the trace ended while it was on its way here
  const ClassifiedInsn& insn = t.process->Instruction(t.ip);
  const uint64_t after = t.ip + insn.size;
  t.model->Retire({t.ip, after, after, InsnClass::kSyscall}, clock_);
  CountRetired(t);
  t.syscall_done = true;
  PTSCOPE_TRY(CheckLimits());
  PTSCOPE_TRY(SwitchOut(t.cpu, false));
  Resume(t, 0);  // off-CPU now: runs the syscall, stops before the next user instruction
  return Ok();
}

void Tracer::ResumeOnCpu(Thread& t, int signal) {
  if (t.cpu < 0) {  // in the kernel: the single-step trap comes before any user instruction
    if (ptrace(PTRACE_SINGLESTEP, t.tid, nullptr, signal) == 0) t.running = true;
    return;
  }
  if (t.step_pending) {  // a step that completed while it was switched out retires here
    t.step_pending = false;
    if (Status status = HandleStepTrap(t); !status && first_status_) first_status_ = status;
    return;
  }
  if (signal == 0 && t.retired - t.slice_start >= options_.timeslice) {
    const int cpu = t.cpu;
    scheduler_->Enqueue(t.tid, cpu);  // behind the threads already waiting
    if (Status status = SwitchOut(cpu, true); !status && first_status_) first_status_ = status;
    return;
  }
  const ClassifiedInsn& insn = t.process->Instruction(t.ip);
  // A syscall with no handler to enter first: stop at its entry instead of stepping over it
  // (a blocking syscall would hold the CPU).
  const auto request =
      insn.is_syscall && !t.injected_caught ? PTRACE_SYSCALL : PTRACE_SINGLESTEP;
  t.resumed_ns = MonotonicNs();
  if (ptrace(request, t.tid, nullptr, signal) == 0) t.running = true;
}

// `t` is stopped at a user instruction, off every CPU: it waits for one.
Status Tracer::Park(Thread& t) {
  scheduler_->Enqueue(t.tid, t.last_cpu);
  return DispatchIdle(t.last_cpu, false);
}

void Tracer::Unqueue(Thread& t) { scheduler_->Remove(t.tid); }

Tracer::Thread* Tracer::PickNext(int cpu) {
  while (auto tid = scheduler_->PickFor(cpu)) {
    auto it = threads_.find(*tid);
    if (it != threads_.end()) return it->second.get();
  }
  return nullptr;
}

// Idle CPUs take waiting threads in the scheduler's rotating order after `after`.
Status Tracer::DispatchIdle(int after, bool skip_after) {
  for (int c : scheduler_->OfferOrder(after, skip_after)) {
    if (scheduler_->empty()) break;
    if (!scheduler_->idle(c)) continue;
    if (Thread* next = PickNext(c)) PTSCOPE_TRY(SwitchTo(c, nullptr, next, false));
  }
  return Ok();
}

// The thread on `cpu` leaves it (preempted, entering a syscall, or exiting); the CPU takes the
// next waiting thread or goes idle, and idle CPUs pick up whatever still waits.
Status Tracer::SwitchOut(int cpu, bool preempt) {
  VirtualCpu& vcpu = cpus_[static_cast<size_t>(cpu)];
  Thread* prev = vcpu.current;
  // Preempted in user code: the trace ends as an interrupt's does, FUP(ip) + TIP.PGD. After a
  // syscall tracing is already off (its TIP.PGD) and nothing is written.
  if (prev->started && !prev->exited) vcpu.model->Disable(prev->ip, clock_);
  prev->cpu = -1;
  prev->last_cpu = cpu;
  prev->model = nullptr;
  vcpu.current = nullptr;
  scheduler_->SetCurrent(cpu, CpuScheduler::kIdle);
  PTSCOPE_TRY(SwitchTo(cpu, prev, PickNext(cpu), preempt));
  PTSCOPE_TRY(DispatchIdle(cpu, true));
  // Left idle for another idle CPU that took one thread while more wait: take the next one.
  return DispatchIdle(cpu, false);
}

Status Tracer::ReleaseCpu(Thread& t) {
  Unqueue(t);
  if (t.cpu < 0) return Ok();
  return SwitchOut(t.cpu, false);
}

// `cpu` switches from `prev` to `next` (either may be null: the idle task). Writes the sideband
// and puts `next` to work.
Status Tracer::SwitchTo(int cpu, Thread* prev, Thread* next, bool preempt) {
  if (!itrace_started_) {  // perf writes one per CPU when the AUX event starts there
    itrace_started_ = true;
    for (size_t c = 0; c < cpus_.size(); ++c) {
      perf::Record start;
      start.type = perf::kRecordItraceStart;
      start.body = perf::ItraceStartRecord{0, 0};
      PTSCOPE_TRY(writer_->AddRecord(start, 0, 0, Ns(), static_cast<uint32_t>(c)));
    }
  }
  ++clock_;
  PTSCOPE_TRY(WriteSwitch(cpu, prev, next, preempt));
  ++clock_;
  if (!next) return Ok();
  if (options_.encoder.timing == TimingMode::kMtc) {
    // Without CYC a decoder knows the time only at MTC edges: the switch lasts until the next
    // edge, so the next thread's first packets come after an MTC later than the switch records.
    const uint64_t period = uint64_t{options_.encoder.tsc_per_ctc} << options_.encoder.mtc_freq;
    clock_ = (clock_ / period + 1) * period + 1;
  }
  Unqueue(*next);
  VirtualCpu& vcpu = cpus_[static_cast<size_t>(cpu)];
  vcpu.current = next;
  scheduler_->SetCurrent(cpu, next->tid);
  next->cpu = cpu;
  next->model = vcpu.model.get();
  next->slice_start = next->retired;
  Resume(*next, 0);  // its first Retire enables tracing: TIP.PGE at its ip
  return Ok();
}

Status Tracer::WriteSwitch(int cpu, const Thread* prev, const Thread* next, bool preempt) {
  const uint32_t prev_pid = prev ? static_cast<uint32_t>(prev->pid) : 0;
  const uint32_t prev_tid = prev ? static_cast<uint32_t>(prev->tid) : 0;
  const uint32_t next_pid = next ? static_cast<uint32_t>(next->pid) : 0;
  const uint32_t next_tid = next ? static_cast<uint32_t>(next->tid) : 0;
  perf::Record out;
  out.type = perf::kRecordSwitchCpuWide;
  out.body = perf::SwitchRecord{true, preempt, true, next_pid, next_tid};
  PTSCOPE_TRY(writer_->AddRecord(out, prev_pid, prev_tid, Ns(), static_cast<uint32_t>(cpu)));
  perf::Record in;
  in.type = perf::kRecordSwitchCpuWide;
  in.body = perf::SwitchRecord{false, false, true, prev_pid, prev_tid};
  return writer_->AddRecord(in, next_pid, next_tid, Ns(), static_cast<uint32_t>(cpu));
}

}  // namespace ptscope::emulate
