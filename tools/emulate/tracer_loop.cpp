// The stepping loop: one waitpid per stop, one PTRACE_GETREGS, a cached decode, the encoder, and
// PTRACE_SINGLESTEP. Everything else (maps re-reads, /proc reads) happens only at rare events.
#include <sys/ptrace.h>
#include <sys/time.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "session.h"
#include "tracer.h"
#include "tracer_util.h"

namespace ptscope::emulate {


namespace {

extern "C" void WakeOnDeadline(int) {}  // only to interrupt waitpid

// While alive: the session's signals are unblocked (a blocking waitpid returns EINTR for them)
// and SIGALRM interrupts the wait at the deadline.
class RunWindow {
 public:
  explicit RunWindow(uint64_t deadline_ns) {
    struct sigaction sa {};
    sa.sa_handler = WakeOnDeadline;  // no SA_RESTART
    sigaction(SIGALRM, &sa, &old_alarm_);
    const uint64_t now = MonotonicNs();
    const uint64_t wait = deadline_ns > now ? deadline_ns - now : 1000;
    itimerval timer{};
    timer.it_value.tv_sec = static_cast<time_t>(wait / 1000000000);
    timer.it_value.tv_usec = static_cast<suseconds_t>(std::max<uint64_t>(1, wait % 1000000000 / 1000));
    setitimer(ITIMER_REAL, &timer, nullptr);
    sigset_t wait_mask = record::SessionSignals::WaitMask();
    sigdelset(&wait_mask, SIGALRM);
    sigaddset(&wait_mask, SIGCHLD);  // the per-CPU wait reads it from a signalfd
    sigprocmask(SIG_SETMASK, &wait_mask, &old_mask_);
  }
  ~RunWindow() {
    itimerval off{};
    setitimer(ITIMER_REAL, &off, nullptr);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    sigaction(SIGALRM, &old_alarm_, nullptr);
  }

 private:
  sigset_t old_mask_{};
  struct sigaction old_alarm_ {};
};

}  // namespace

Result<record::SourceEvents> Tracer::Run(uint64_t deadline_ns) {
  if (next_time_sync_ == 0) SampleTimeSync();
  if (per_cpu() && sigchld_fd_ < 0) PTSCOPE_TRY(OpenSigchldFd());
  record::SourceEvents events;
  if (trigger_pending_) {  // the session acted on the trigger: the thread that hit it goes on
    trigger_pending_ = false;
    if (trigger_thread_ != nullptr) Resume(*trigger_thread_, trigger_signal_);
    trigger_thread_ = nullptr;
  }
  RunWindow window(deadline_ns);
  uint64_t steps = 0;
  while (!threads_.empty()) {
    if (record::SessionSignals::Pending()) break;
    if (stopping_ && std::none_of(threads_.begin(), threads_.end(),
                                  [](const auto& t) { return t.second->running; })) {
      break;  // quiesced: the session decides what follows (snapshot, finish)
    }
    if ((++steps & 255) == 0 && MonotonicNs() >= deadline_ns) break;
    Result<bool> waited = WaitAndHandle();
    if (!waited) return std::move(waited).error();
    if (!*waited && MonotonicNs() >= deadline_ns) break;
    if (trigger_pending_) {
      events.trigger_hit = true;
      events.trigger_address = trigger_ip_;
      break;
    }
    if (limit_reached_) {
      limit_reached_ = false;
      events.instruction_limit = true;
      break;
    }
  }
  if (threads_.empty()) events.target_gone = true;
  PTSCOPE_TRY(FlushOutputs());
  return events;
}

Status Tracer::FlushOutputs() {
  // A ground-truth write error is kept for its Close(), at the end of the capture.
  if (truth_ != nullptr && !capture_ended_) (void)truth_->Flush();
  if (options_.snapshot_size == 0) {
    PTSCOPE_TRY(ForEachStream([&](PtEncoderModel&, StreamOutput& output) {
      return output.Flush(clock_);
    }));
  }
  PTSCOPE_TRY(WriteTimeSync());
  return writer_->FlushSideband();
}

// One wait: a stop handled (true), or an interrupted wait (false: a signal or the deadline).
Result<bool> Tracer::WaitAndHandle() {
  int status = 0;
  const pid_t tid = per_cpu() ? WaitPerCpu(&status) : waitpid(-1, &status, __WALL);
  if (tid < 0) {
    if (errno == EINTR) {
      PTSCOPE_TRY(first_status_);
      return false;
    }
    if (errno == ECHILD) {  // nothing left to wait for: every thread is gone
      for (auto& [id, t] : threads_) finished_.push_back(std::move(t));
      threads_.clear();
      return false;
    }
    return MakeError(Errc::kInternal, std::string("waitpid failed: ") + std::strerror(errno));
  }
  PTSCOPE_TRY(HandleStop(tid, status));
  PTSCOPE_TRY(first_status_);
  if (summary_.instructions - deferred_checked_at_ >= 65536) {
    deferred_checked_at_ = summary_.instructions;
    PTSCOPE_TRY(CheckDeferred());
  }
  return true;
}

Status Tracer::Quiesce() {
  if (!stopping_) BeginStop();
  while (std::any_of(threads_.begin(), threads_.end(),
                     [](const auto& t) { return t.second->running; })) {
    Result<bool> waited = WaitAndHandle();
    if (!waited) return std::move(waited).error();
  }
  return Ok();
}

Status Tracer::CheckDeferred() {
  return ForEachStream([](PtEncoderModel&, StreamOutput& output) { return output.deferred_status(); });
}

Status Tracer::HandleStop(pid_t tid, int status) {
  auto it = threads_.find(tid);
  if (WIFEXITED(status) || WIFSIGNALED(status)) {
    if (it == threads_.end()) return Ok();
    Thread& t = *it->second;
    if (!t.exited && t.started && t.model) t.model->Disable(t.ip, clock_);
    if (per_cpu()) PTSCOPE_TRY(ReleaseCpu(t));
    finished_.push_back(std::move(it->second));
    threads_.erase(it);
    return Ok();
  }
  if (it == threads_.end()) {  // a new task reporting before its creator's clone event
    const pid_t pid = Tgid(tid);
    if (!Process(pid)) {
      if (!options_.follow_fork) {
        ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
        return Ok();
      }
      PTSCOPE_TRY(StartProcess(pid, tid, false));
    }
    AddThread(tid, pid);
    it = threads_.find(tid);
  }
  Thread& t = *it->second;
  t.running = false;
  const int sig = WSTOPSIG(status);
  const int event = status >> 16;
  if (per_cpu() && stepping_) {
    if (t.cpu < 0) return HandleOffCpuStop(t, status);
    if (event == 0 && sig == (SIGTRAP | 0x80)) return OnSyscallEntry(t);
  }
  if (!stepping_ && event == 0 && sig == (SIGTRAP | 0x80)) return OnUntracedSyscallStop(t);
  if (event != 0) return HandleEvent(t, event);
  if (sig == SIGTRAP) return HandleStepTrap(t);
  Resume(t, sig);  // a signal for the target: deliver it
  return Ok();
}

Status Tracer::HandleEvent(Thread& t, int event) {
  switch (event) {
    case PTRACE_EVENT_STOP: {  // our interrupt, a group-stop, or a new task's first stop
      user_regs_struct regs{};
      ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs);
      if (t.started && stepping_ && regs.rip != t.ip) return HandleStepTrap(t);
      t.ip = regs.rip;
      t.started = true;
      // Stopped inside a syscall (attach, interrupt): the kernel may rewind to re-run it on
      // resume. Tracing starts at whatever user instruction comes next.
      t.resync = static_cast<int64_t>(regs.orig_rax) >= 0;
      Resume(t, 0);
      return Ok();
    }
    case PTRACE_EVENT_CLONE:
    case PTRACE_EVENT_FORK:
    case PTRACE_EVENT_VFORK: {
      unsigned long message = 0;
      ptrace(PTRACE_GETEVENTMSG, t.tid, nullptr, &message);
      const pid_t child = static_cast<pid_t>(message);
      const pid_t child_pid = event == PTRACE_EVENT_CLONE ? Tgid(child) : child;
      const bool new_process = child_pid != t.pid;
      if (!new_process || options_.follow_fork) {
        if (new_process && !Process(child_pid)) PTSCOPE_TRY(StartProcess(child_pid, child, false));
        if (!threads_.count(child)) AddThread(child, child_pid);
        PTSCOPE_TRY(writer_->AddFork(static_cast<uint32_t>(child_pid), static_cast<uint32_t>(t.pid),
                                     static_cast<uint32_t>(child), static_cast<uint32_t>(t.tid),
                                     Ns()));
        if (!new_process) {
          PTSCOPE_TRY(writer_->AddComm(static_cast<uint32_t>(child_pid), static_cast<uint32_t>(child),
                                       Comm(child_pid, child), false, Ns()));
        }
      }
      Resume(t, 0);
      return Ok();
    }
    case PTRACE_EVENT_EXEC: {
      unsigned long former = 0;
      ptrace(PTRACE_GETEVENTMSG, t.tid, nullptr, &former);
      return OnExec(t, static_cast<pid_t>(former));
    }
    case PTRACE_EVENT_EXIT:
      PTSCOPE_TRY(OnThreadExit(t));
      if (per_cpu()) PTSCOPE_TRY(ReleaseCpu(t));  // killed while on a virtual CPU
      if (ptrace(PTRACE_CONT, t.tid, nullptr, nullptr) == 0) t.running = true;
      return Ok();
    default:
      Resume(t, 0);
      return Ok();
  }
}

Status Tracer::HandleStepTrap(Thread& t) {
  user_regs_struct& regs = t.regs;
  ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs);
  if (!stepping_) {
    if (t.pid == start_at_pid_ && regs.rip == start_at_address_ + 1) {
      // Our breakpoint: restore the code, rewind, and trace everything from here on.
      ptrace(PTRACE_POKETEXT, t.tid, start_at_address_, start_at_saved_word_);
      regs.rip = start_at_address_;
      ptrace(PTRACE_SETREGS, t.tid, nullptr, &regs);
      start_at_address_ = 0;
      stepping_ = true;
      t.ip = regs.rip;
      // Everything mapped while the startup ran unstepped (libc, dlopen'ed libraries) must be in
      // the sideband before the first traced instruction, or decoders cannot follow into it.
      PTSCOPE_TRY(t.process->RefreshMaps(writer_, t.tid, Ns(), false));
      for (auto& [tid, other] : threads_) {
        if (other->running) ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
      }
      if (per_cpu()) return Park(t);  // it waits for a virtual CPU like any runnable thread
      Resume(t, 0);
      return Ok();
    }
    Resume(t, SIGTRAP);  // the program's own trap
    return Ok();
  }
  // A step in flight when the trace ended (trigger snapshot, --max-instructions): its
  // instruction is in neither the trace nor the ground truth, and the thread stays stopped.
  if (capture_ended_) return Ok();
  if (t.resync) {
    t.resync = false;
    t.ip = regs.rip;
    Resume(t, 0);
    return Ok();
  }
  if (t.exec_trap) {  // the step report of a completed execve: nothing executed yet
    t.exec_trap = false;
    if (regs.rip == t.ip) {
      Resume(t, 0);
      return Ok();
    }
  }
  if (t.injected != 0 && t.injected_caught) {
    // The kernel set up a signal frame and stopped at the handler's first instruction.
    t.model->AsyncBranch(t.ip, regs.rip, clock_);
    t.ip = regs.rip;
    Resume(t, 0);
    return Ok();
  }
  const ClassifiedInsn& insn = t.process->Instruction(t.ip);
  const uint64_t next = regs.rip;
  if (insn.repeats && next == t.ip) {  // one more iteration of a rep string op
    Resume(t, 0);
    return Ok();
  }
  RetiredInsn retired{t.ip, t.ip + insn.size, next, insn.cls};
  uint64_t expected = next;
  switch (insn.cls) {
    case InsnClass::kOther: expected = retired.fallthrough; break;
    case InsnClass::kJump:
    case InsnClass::kCall: expected = insn.direct_target; break;
    case InsnClass::kCondBranch:
      if (next != insn.direct_target) expected = retired.fallthrough;
      break;
    default: break;
  }
  const bool unexpected = insn.size == 0 || expected != next;
  if (unexpected) retired.next_ip = expected;
  const uint64_t retired_at = clock_;
  t.model->Retire(retired, clock_);
  CountRetired(t);
  AddRealTime(t, insn.cls == InsnClass::kSyscall && !insn.is_int3, retired_at);
  if (unexpected) {  // e.g. a kernel-initiated transfer we could not see: keep the stream honest
    if (getenv("PTSCOPE_EMULATE_DEBUG"))
      fprintf(stderr, "unexpected: tid %d ip %llx size %d cls %d next %llx expected %llx\n", t.tid,
              (unsigned long long)t.ip, insn.size, (int)insn.cls, (unsigned long long)next,
              (unsigned long long)expected);
    ++summary_.unexpected_flow;
    t.model->AsyncBranch(expected, next, clock_);
  }
  const uint64_t ip = t.ip;
  t.ip = next;
  int signal = 0;
  if (insn.cls == InsnClass::kSyscall) {
    if (insn.is_int3) {
      signal = SIGTRAP;  // the program's own breakpoint: it gets its SIGTRAP
    } else {
      PTSCOPE_TRY(OnSyscallRetired(t, regs.orig_rax));
    }
  }
  if (summary_.instructions >= next_time_sync_) SampleTimeSync();
  if (options_.trigger != nullptr && t.process->trigger_address == ip &&
      (!trigger_done_ || options_.multi_snapshot)) {
    // The session decides (snapshot, stop); this thread waits, stopped, until it has.
    trigger_done_ = true;
    trigger_pending_ = true;
    trigger_thread_ = &t;
    trigger_signal_ = signal;
    trigger_ip_ = ip;
    PTSCOPE_TRY(CheckLimits());
    return Ok();
  }
  PTSCOPE_TRY(CheckLimits());
  Resume(t, signal);
  return Ok();
}

// After each retired instruction: time sync pairs, and --max-instructions.
Status Tracer::CheckLimits() {
  if (summary_.instructions >= next_time_sync_) SampleTimeSync();
  if (options_.max_instructions != 0 && summary_.instructions >= options_.max_instructions &&
      !stopping_) {
    // Exactly N: no thread is resumed any more, and the steps other threads have in flight
    // complete outside the trace (capture_ended_). The session then stops the capture.
    capture_ended_ = true;
    BeginStop();
    limit_reached_ = true;
  }
  return Ok();
}

Status Tracer::OnSyscallRetired(Thread& t, uint64_t nr) {
  ProcessState& process = *t.process;
  if (ChangesMappings(nr)) {
    PTSCOPE_TRY(process.RefreshMaps(writer_, t.tid, Ns(), false));
    if (process.trigger_address == 0) process.trigger_address = ResolveTrigger(process);
  } else if (nr == 157) {  // prctl: PR_SET_NAME may have renamed the thread
    const std::string comm = Comm(t.pid, t.tid);
    if (!comm.empty() && comm != process.comm) {
      process.comm = comm;
      PTSCOPE_TRY(writer_->AddComm(static_cast<uint32_t>(t.pid), static_cast<uint32_t>(t.tid),
                                   comm, false, Ns()));
    }
  }
  return Ok();
}

// A syscall stop before --start-at is armed (PTRACE_SYSCALL): once a call that maps code has
// returned, the new libraries may hold the symbol. Entry stops have rax = -ENOSYS.
Status Tracer::OnUntracedSyscallStop(Thread& t) {
  user_regs_struct regs{};
  ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs);
  const bool exit_stop = static_cast<int64_t>(regs.rax) != -ENOSYS;
  if (exit_stop && start_at_address_ == 0 && t.pid == start_at_pid_ &&
      ChangesMappings(regs.orig_rax)) {
    PTSCOPE_TRY(t.process->RefreshMaps(writer_, t.tid, Ns(), false));
    PTSCOPE_TRY(ArmStartAt(*t.process, t));
  }
  Resume(t, 0);
  return Ok();
}

Status Tracer::OnExec(Thread& t_in, pid_t former) {
  Thread* t = &t_in;
  if (former != t->tid && threads_.count(former)) {
    // A non-leader thread exec'd and took over the leader's tid.
    auto leader = std::move(threads_[t->tid]);
    auto execing = std::move(threads_[former]);
    threads_.erase(former);
    if (!leader->exited && leader->model) leader->model->Disable(leader->ip, clock_);
    if (per_cpu()) PTSCOPE_TRY(ReleaseCpu(*leader));
    finished_.push_back(std::move(leader));
    execing->tid = t_in.tid;
    t = execing.get();
    threads_[t->tid] = std::move(execing);
  }
  user_regs_struct regs{};
  ptrace(PTRACE_GETREGS, t->tid, nullptr, &regs);
  // The execve syscall retired (per-CPU mode retired it at its entry); tracing pauses in the kernel.
  if (stepping_ && !capture_ended_ && t->started && !t->syscall_done && t->model) {
    const ClassifiedInsn& insn = t->process->Instruction(t->ip);
    t->model->Retire({t->ip, t->ip + insn.size, regs.rip, InsnClass::kSyscall}, clock_);
    CountRetired(*t);
  }
  t->syscall_done = false;
  PTSCOPE_TRY(StartProcess(t->pid, t->tid, true));
  t->process = Process(t->pid);
  t->process->trigger_address = ResolveTrigger(*t->process);
  if (!stepping_ && t->pid == start_at_pid_) {  // the int3 went with the old image
    start_at_address_ = 0;
    PTSCOPE_TRY(ArmStartAt(*t->process, *t));
  }
  t->ip = regs.rip;
  t->exec_trap = true;
  t->started = true;
  // Per-CPU mode: it waits for a CPU here; its first step there reports the completed execve.
  if (per_cpu() && stepping_ && t->cpu < 0) return Park(*t);
  Resume(*t, 0);
  return Ok();
}

Status Tracer::OnThreadExit(Thread& t) {
  user_regs_struct regs{};
  ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs);
  // Off every virtual CPU (t.model null) its trace already ended at the switch-out.
  if (stepping_ && t.started && !t.exited && !t.syscall_done && t.model) {
    const ClassifiedInsn& insn = t.process->Instruction(t.ip);
    const bool exit_call = regs.orig_rax == 60 || regs.orig_rax == 231;
    if (!capture_ended_ && insn.cls == InsnClass::kSyscall && exit_call &&
        regs.rip == t.ip + insn.size) {
      t.model->Retire({t.ip, t.ip + insn.size, regs.rip, InsnClass::kSyscall}, clock_);
      CountRetired(t);
    } else {
      t.model->Disable(t.ip, clock_);
    }
  }
  t.exited = true;
  return writer_->AddExit(static_cast<uint32_t>(t.pid), static_cast<uint32_t>(t.pid),
                          static_cast<uint32_t>(t.tid), static_cast<uint32_t>(t.tid), Ns());
}

// The trigger's run-time address in `process` (0: not mapped there, or no trigger).
uint64_t Tracer::ResolveTrigger(ProcessState& process) const {
  if (options_.trigger == nullptr) return 0;
  auto exe = record::ProcessExePath(process.pid());
  auto resolved = record::ResolveTrigger(*options_.trigger, exe ? *exe : std::string(),
                                         process.maps());
  return resolved ? resolved->address : 0;
}

Status Tracer::TakeSnapshot(uint32_t index) {
  ++summary_.snapshots;
  // Taking a snapshot stops every thread's trace (a trigger is a breakpoint; perf interrupts the
  // other CPUs to stop their events): each running thread enters the kernel, untraced with
  // user-only tracing, before its next instruction. That is an asynchronous disable there, FUP
  // and TIP.PGD, as the hardware writes it; without it a thread's trace would end at its last
  // branch packet, and a decoder could not place the instructions retired after it (the call
  // into the trigger function, typically). A thread that goes on resumes with TIP.PGE.
  for (auto& [tid, t] : threads_) {
    if (t->started && !t->exited && t->model != nullptr) t->model->Disable(t->ip, clock_);
  }
  PTSCOPE_TRY(ForEachStream([&](PtEncoderModel& model, StreamOutput& output) {
    model.FlushPending();
    return output.WriteSnapshot(index, clock_);
  }));
  return writer_->FlushSideband();
}

Status Tracer::Snapshot(uint32_t index, bool final) {
  if (final && trigger_pending_) {
    // At the trigger: the trace ends right there. A step still in flight in another thread
    // completes after the snapshot; its instruction is in neither the trace nor the ground truth.
    capture_ended_ = true;
    BeginStop();
  } else if (final) {
    PTSCOPE_TRY(Quiesce());  // every step in flight retires first, into trace and ground truth
  }
  return TakeSnapshot(index);
}

void Tracer::BeginStop() {
  if (stopping_) return;
  stopping_ = true;
  for (auto& [tid, t] : threads_) {
    if (t->running) ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
  }
}

// Leaves every thread running as if we had never been there.
Status Tracer::DetachAll() {
  if (start_at_address_ != 0) {
    ptrace(PTRACE_POKETEXT, start_at_pid_, start_at_address_, start_at_saved_word_);
  }
  for (auto& [tid, t] : threads_) {
    if (t->started && !t->exited && t->model) t->model->Disable(t->ip, clock_);
    DrainStepTrap(*t);
    ptrace(PTRACE_DETACH, tid, nullptr, t->pending_signal);
    finished_.push_back(std::move(t));
  }
  threads_.clear();
  return Ok();
}

// A thread stopped by PTRACE_INTERRUPT right after a single-step still has the step's SIGTRAP
// pending; detached, that SIGTRAP would kill it. Let it arrive as a signal-delivery-stop (which
// a tracer can suppress) first.
void Tracer::DrainStepTrap(Thread& t) {
  if (t.exited) return;
  auto status = record::ReadProcFile(record::ProcDir(t.tid) + "/status");
  if (!status) return;
  const uint64_t trap_bit = uint64_t{1} << (SIGTRAP - 1);
  uint64_t pending = 0;
  for (const char* key : {"SigPnd:", "ShdPnd:"}) {
    const size_t at = status->find(key);
    if (at != std::string::npos) pending |= std::strtoull(status->c_str() + at + 7, nullptr, 16);
  }
  if (!(pending & trap_bit)) return;
  if (ptrace(PTRACE_CONT, t.tid, nullptr, nullptr) != 0) return;
  int wait_status = 0;
  if (waitpid(t.tid, &wait_status, __WALL) != t.tid || !WIFSTOPPED(wait_status)) return;
  const int sig = WSTOPSIG(wait_status);
  if ((wait_status >> 16) == 0 && sig != SIGTRAP) t.pending_signal = sig;  // someone else's
}

// The time sync pairs sampled since the last call, as one TimeSync chunk.
Status Tracer::WriteTimeSync() {
  if (time_sync_written_ == time_sync_.size()) return Ok();
  format::TimeSyncChunk sync;
  sync.clock_id = 1;
  sync.tsc_and_clock_ns.assign(time_sync_.begin() + static_cast<ptrdiff_t>(time_sync_written_),
                               time_sync_.end());
  time_sync_written_ = time_sync_.size();
  return writer_->WriteChunk(sync);
}

Status Tracer::Finish() {
  if (done_) return Ok();
  done_ = true;
  PTSCOPE_TRY(Quiesce());
  if (trigger_pending_ && trigger_thread_ != nullptr) trigger_thread_->pending_signal = trigger_signal_;
  trigger_pending_ = false;
  PTSCOPE_TRY(DetachAll());
  if (!stepping_) {
    const std::string& spec = options_.start_at->text;
    warnings_.push_back(!start_at_where_.empty()
                            ? "nothing traced: --start-at " + spec + " (" + start_at_where_ +
                                  ") was never executed"
                            : "nothing traced: " + (start_at_error_.empty()
                                                        ? "--start-at " + spec + " never resolved"
                                                        : start_at_error_));
  }
  summary_.seconds = static_cast<double>(MonotonicNs() - started_ns_) / 1e9;
  SampleTimeSync();
  PTSCOPE_TRY(CheckDeferred());
  if (options_.snapshot_size == 0) {
    PTSCOPE_TRY(ForEachStream([&](PtEncoderModel&, StreamOutput& output) {
      return output.Flush(clock_);
    }));
  }
  PTSCOPE_TRY(ForEachStream([&](PtEncoderModel&, StreamOutput& output) {
    summary_.pt_bytes += output.total_bytes();
    return Ok();
  }));
  PTSCOPE_TRY(WriteTimeSync());
  return writer_->FlushSideband();
}

void Tracer::Abort() {
  if (done_) return;
  done_ = true;
  // Detach cleanly so that no thread is left with a pending single-step trap (which would kill
  // it): interrupt everyone, let the steps in flight complete, then detach.
  if (Status quiet = Quiesce(); !quiet) return;
  (void)DetachAll();
}

}  // namespace ptscope::emulate
