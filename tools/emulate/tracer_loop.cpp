// The stepping loop: one waitpid per stop, one PTRACE_GETREGS, a cached decode, the encoder, and
// PTRACE_SINGLESTEP. Everything else (maps re-reads, /proc reads) happens only at rare events.
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "tracer.h"
#include "tracer_util.h"

namespace ptscope::emulate {

namespace {

std::optional<std::string> ReadWhole(const std::string& path) {
  auto text = record::ReadProcFile(path);
  if (!text) return std::nullopt;
  return *text;
}

}  // namespace

Status Tracer::Run() {
  const auto start = std::chrono::steady_clock::now();
  SampleTimeSync();
  if (per_cpu()) PTSCOPE_TRY(OpenSigchldFd());
  uint64_t checked_at = 0;
  while (!threads_.empty()) {
    if (g_stop_requested && !stopping_) PTSCOPE_TRY(BeginStop("signal"));
    if (g_snapshot_requested) {
      g_snapshot_requested = 0;
      PTSCOPE_TRY(TakeSnapshot("usr2", 0));
    }
    if (stopping_ && std::none_of(threads_.begin(), threads_.end(),
                                  [](const auto& t) { return t.second->running; })) {
      PTSCOPE_TRY(DetachAll());
      break;
    }
    int status = 0;
    const pid_t tid = per_cpu() ? WaitPerCpu(&status) : waitpid(-1, &status, __WALL);
    if (tid < 0) {
      if (errno == EINTR) {
        PTSCOPE_TRY(first_status_);
        continue;
      }
      if (errno == ECHILD) break;
      return MakeError(Errc::kInternal, std::string("waitpid failed: ") + std::strerror(errno));
    }
    PTSCOPE_TRY(HandleStop(tid, status));
    PTSCOPE_TRY(first_status_);
    if (summary_.instructions - checked_at >= 65536) {
      checked_at = summary_.instructions;
      PTSCOPE_TRY(CheckDeferred());
    }
  }
  summary_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  SampleTimeSync();
  PTSCOPE_TRY(CheckDeferred());
  return WriteStreams();
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
  t.model->Retire(retired, clock_);
  CountRetired(t);
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
  if (t.process->trigger_address == ip && (!trigger_done_ || options_.multi_snapshot)) {
    trigger_done_ = true;
    PTSCOPE_TRY(TakeSnapshot("trigger", ip));
    if (!options_.multi_snapshot && options_.snapshot_size != 0) {
      capture_ended_ = true;
      PTSCOPE_TRY(BeginStop("trigger"));
    }
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
    PTSCOPE_TRY(BeginStop("max-instructions"));
  }
  return Ok();
}

Status Tracer::OnSyscallRetired(Thread& t, uint64_t nr) {
  ProcessState& process = *t.process;
  if (ChangesMappings(nr)) {
    PTSCOPE_TRY(process.RefreshMaps(writer_, t.tid, Ns(), false));
    if (!options_.trigger.empty() && process.trigger_address == 0)
      process.trigger_address = process.ResolveSymbol(options_.trigger).value_or(0);
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
  if (stepping_ && t->started && !t->syscall_done && t->model) {
    const ClassifiedInsn& insn = t->process->Instruction(t->ip);
    t->model->Retire({t->ip, t->ip + insn.size, regs.rip, InsnClass::kSyscall}, clock_);
    CountRetired(*t);
  }
  t->syscall_done = false;
  PTSCOPE_TRY(StartProcess(t->pid, t->tid, true));
  t->process = Process(t->pid);
  if (!options_.trigger.empty())
    t->process->trigger_address = t->process->ResolveSymbol(options_.trigger).value_or(0);
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
    if (insn.cls == InsnClass::kSyscall && exit_call && regs.rip == t.ip + insn.size) {
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

Status Tracer::TakeSnapshot(const std::string& reason, uint64_t address) {
  if (reason == "trigger") {
    format::MarkerChunk marker;
    marker.kind = format::MarkerKind::kTrigger;
    marker.tsc = clock_;
    marker.value = address;
    marker.text = options_.trigger;
    PTSCOPE_TRY(writer_->WriteChunk(marker));
  }
  if (options_.snapshot_size == 0) return Ok();  // full mode: the marker is all
  const uint32_t index = static_cast<uint32_t>(summary_.snapshots++);
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

Status Tracer::BeginStop(const std::string& reason) {
  stopping_ = true;
  summary_.stop_reason = reason;
  for (auto& [tid, t] : threads_) {
    if (t->running) ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
  }
  return Ok();
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

Status Tracer::WriteStreams() {
  if (options_.snapshot_size == 0) {
    PTSCOPE_TRY(ForEachStream([&](PtEncoderModel&, StreamOutput& output) { return output.Flush(clock_); }));
  } else if (options_.trigger.empty() || summary_.snapshots == 0) {
    PTSCOPE_TRY(TakeSnapshot(summary_.stop_reason, 0));
  }
  PTSCOPE_TRY(ForEachStream([&](PtEncoderModel&, StreamOutput& output) {
    summary_.pt_bytes += output.total_bytes();
    return Ok();
  }));
  format::TimeSyncChunk sync;
  sync.clock_id = 1;
  sync.tsc_and_clock_ns = summary_.time_sync;
  PTSCOPE_TRY(writer_->WriteChunk(sync));
  // jitdump files and perf maps the targets wrote, so JIT code can be named later.
  for (const auto& [pid, process] : processes_) {
    std::vector<std::pair<format::BlobKind, std::string>> files;
    for (const auto& path : process->jitdumps()) files.push_back({format::BlobKind::kJitdump, path});
    files.push_back({format::BlobKind::kPerfMap, "/tmp/perf-" + std::to_string(pid) + ".map"});
    for (const auto& [kind, path] : files) {
      auto text = ReadWhole(path);
      if (!text) continue;
      format::BlobChunk blob;
      blob.kind = kind;
      blob.name = path;
      blob.pid = static_cast<uint32_t>(pid);
      blob.data.assign(text->begin(), text->end());
      PTSCOPE_TRY(writer_->WriteChunk(blob));
    }
  }
  return writer_->FlushSideband();
}

}  // namespace ptscope::emulate
