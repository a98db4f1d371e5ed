#include "tracer.h"

#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "tracer_util.h"
#include "vdso.h"

namespace ptscope::emulate {

namespace {

constexpr unsigned kPtraceOptions = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC |
                                    PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL;
constexpr uint64_t kTimeSyncEvery = 1000000;

Error PtraceError(const std::string& what, pid_t pid) {
  const int err = errno;
  if (err == EPERM || err == EACCES) {
    return MakeError(Errc::kPermission,
                     what + " " + std::to_string(pid) + ": " + std::strerror(err) +
                         " (ptrace is restricted: run as root or with CAP_SYS_PTRACE, set "
                         "/proc/sys/kernel/yama/ptrace_scope to 0, or allow ptrace in the "
                         "container's seccomp profile)");
  }
  if (err == ESRCH) {
    return MakeError(Errc::kNotFound, "no process " + std::to_string(pid) + " (it is gone)");
  }
  return MakeError(Errc::kIo, what + " " + std::to_string(pid) + ": " + std::strerror(err));
}

}  // namespace


// ---- setup ----

Tracer::Tracer(const EmulateOptions& options, record::CaptureWriter* writer,
               GroundTruthWriter* truth, TimeConversion time)
    : options_(options), writer_(writer), truth_(truth), time_(time) {
  stepping_ = !options_.start_at.has_value();
  if (options_.cpus > 0) CreateCpus();
}

Tracer::~Tracer() {
  if (sigchld_fd_ >= 0) {
    close(sigchld_fd_);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
  }
}

ProcessState* Tracer::Process(pid_t pid) {
  auto it = processes_.find(pid);
  return it == processes_.end() ? nullptr : it->second.get();
}

Tracer::Thread& Tracer::AddThread(pid_t tid, pid_t pid) {
  auto thread = std::make_unique<Thread>();
  thread->tid = tid;
  thread->pid = pid;
  thread->process = Process(pid);
  if (!per_cpu()) {  // per-CPU mode: the virtual CPUs own the streams
    const uint32_t id = next_stream_id_++;
    thread->output = std::make_unique<StreamOutput>(writer_, id, static_cast<uint32_t>(pid),
                                                    static_cast<uint32_t>(tid),
                                                    options_.snapshot_size);
    thread->own_model = std::make_unique<PtEncoderModel>(options_.encoder, thread->output.get());
    thread->model = thread->own_model.get();
  }
  ++summary_.threads;
  Thread& ref = *thread;
  threads_[tid] = std::move(thread);
  return ref;
}

// A process whose address space we start tracking: mappings, vdso bytes, COMM.
Status Tracer::StartProcess(pid_t pid, pid_t tid, bool exec) {
  auto& slot = processes_[pid];
  if (!slot) slot = std::make_unique<ProcessState>(pid);
  ProcessState& process = *slot;
  PTSCOPE_TRY(process.OpenMemory());
  process.comm = Comm(pid, tid);
  PTSCOPE_TRY(writer_->AddComm(static_cast<uint32_t>(pid), static_cast<uint32_t>(tid),
                               process.comm, exec, Ns()));
  PTSCOPE_TRY(process.RefreshMaps(writer_, tid, Ns(), true));
  if (auto vdso = record::ReadVdso(pid, process.maps())) {
    format::BlobChunk blob;
    blob.kind = format::BlobKind::kVdso;
    blob.name = "vdso64";
    blob.pid = static_cast<uint32_t>(pid);
    blob.vaddr = vdso->vaddr;
    blob.data = std::move(vdso->bytes);
    PTSCOPE_TRY(writer_->WriteChunk(blob));
  }
  return Ok();
}

Status Tracer::AdoptLaunched(pid_t pid) {
  launched_pid_ = pid;
  started_ns_ = MonotonicNs();
  PTSCOPE_TRY(StartProcess(pid, pid, true));
  Thread& t = AddThread(pid, pid);
  ptrace(PTRACE_GETREGS, pid, nullptr, &t.regs);
  t.ip = t.regs.rip;
  t.started = true;
  t.exec_trap = true;
  if (!stepping_) PTSCOPE_TRY(ArmStartAt(*Process(pid), t));
  if (per_cpu() && stepping_) return Park(t);  // its first step on a CPU reports the exec
  Resume(t, 0);
  return Ok();
}

Result<std::vector<int>> SeizeThreads(pid_t pid, unsigned ptrace_options) {
  // Seize every thread; list again until no new thread appeared meanwhile.
  std::vector<int> seized;
  for (int round = 0; round < 10; ++round) {
    PTSCOPE_ASSIGN_OR_RETURN(auto tids, record::ListThreads(pid));
    bool added = false;
    for (int tid : tids) {
      if (std::find(seized.begin(), seized.end(), tid) != seized.end()) continue;
      if (ptrace(PTRACE_SEIZE, tid, nullptr, ptrace_options & ~PTRACE_O_EXITKILL) != 0) {
        if (errno == ESRCH && !seized.empty()) continue;  // that thread just exited
        return PtraceError("cannot attach to", tid);
      }
      ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
      seized.push_back(tid);
      added = true;
    }
    if (!added) break;
  }
  return seized;
}

Status Tracer::AdoptAttached(pid_t pid, const std::vector<int>& tids) {
  if (started_ns_ == 0) started_ns_ = MonotonicNs();
  PTSCOPE_TRY(StartProcess(pid, pid, false));
  for (int tid : tids) {
    Thread& t = AddThread(tid, pid);
    t.running = true;  // its interrupt stop is on the way
    if (tid != pid) {
      PTSCOPE_TRY(writer_->AddComm(static_cast<uint32_t>(pid), static_cast<uint32_t>(tid),
                                   Comm(pid, tid), false, Ns()));
    }
  }
  if (!stepping_ && !tids.empty()) PTSCOPE_TRY(ArmStartAt(*Process(pid), *threads_[pid]));
  return Ok();
}

// --start-at: an int3 at the symbol or address once the process has it mapped (see tracer.h);
// until then the resolution error is kept for the end-of-capture warning.
Status Tracer::ArmStartAt(ProcessState& process, Thread& t) {
  start_at_pid_ = process.pid();
  auto exe = record::ProcessExePath(process.pid());
  auto resolved = record::ResolveTrigger(*options_.start_at, exe ? *exe : std::string(),
                                         process.maps());
  if (!resolved) {
    start_at_error_ = resolved.error().message;
    return Ok();
  }
  errno = 0;
  const long word = ptrace(PTRACE_PEEKTEXT, t.tid, resolved->address, nullptr);
  if (errno != 0) return PtraceError("cannot read code of", t.tid);
  const long patched = (word & ~0xffL) | 0xcc;
  if (ptrace(PTRACE_POKETEXT, t.tid, resolved->address, patched) != 0)
    return PtraceError("cannot set a breakpoint in", t.tid);
  start_at_address_ = resolved->address;
  start_at_saved_word_ = word;
  start_at_where_ = resolved->where;
  return Ok();
}

unsigned PtraceOptionsFor(const EmulateOptions& options) {
  // Per-CPU mode resumes a thread at a syscall with PTRACE_SYSCALL: its entry stop switches it
  // out (TRACESYSGOOD tells that stop from a step trap).
  // --start-at waits for libraries at syscall stops the same way.
  return kPtraceOptions | (options.follow_fork ? PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK : 0) |
         (options.cpus > 0 || options.start_at ? PTRACE_O_TRACESYSGOOD : 0);
}

unsigned Tracer::PtraceOptions() const { return PtraceOptionsFor(options_); }

void Tracer::Resume(Thread& t, int signal) {
  if (stopping_) {  // leave it stopped for the detach; its signal goes with the detach
    t.pending_signal = signal;
    return;
  }
  t.injected = signal;
  t.injected_caught = signal != 0 && t.process && t.process->SignalCaught(signal);
  if (per_cpu() && stepping_) return ResumeOnCpu(t, signal);
  const auto request = stepping_                ? PTRACE_SINGLESTEP
                       : start_at_address_ != 0 ? PTRACE_CONT
                                                : PTRACE_SYSCALL;  // --start-at not mapped yet
  t.step_ns = options_.real_clock && stepping_ ? MonotonicNs() : 0;
  if (ptrace(request, t.tid, nullptr, signal) == 0) t.running = true;
}

// --clock real. A single step over a syscall returns when the kernel has finished it (blocked,
// slept, been descheduled); any step also costs the tracer some microseconds, learned from plain
// instructions. The syscall's real time beyond that moves the shared clock on: it ends no
// earlier than `retired_at` plus that time (other threads may have moved it meanwhile). User code
// keeps the virtual rate: its real time under ptrace is mostly the tracer's.
void Tracer::AddRealTime(Thread& t, bool syscall, uint64_t retired_at) {
  if (t.step_ns == 0) return;
  const uint64_t wall = MonotonicNs() - t.step_ns;
  t.step_ns = 0;
  if (!syscall) {
    step_cost_ns_ = step_cost_ns_ == 0 ? wall : (step_cost_ns_ * 15 + wall) / 16;
    return;
  }
  if (wall <= step_cost_ns_) return;
  const unsigned __int128 ticks =
      (static_cast<unsigned __int128>(wall - step_cost_ns_) << time_.shift) / time_.mult;
  clock_ = std::max(clock_, retired_at + 1 + static_cast<uint64_t>(ticks));
}

// One instruction of `t` retired: the virtual clock ticks and the ground truth gets its line.
void Tracer::CountRetired(Thread& t) {
  ++clock_;
  ++summary_.instructions;
  ++t.retired;
  if (truth_ && !capture_ended_) truth_->Add(static_cast<uint32_t>(t.tid), t.ip);
}

void Tracer::SampleTimeSync() {
  time_sync_.push_back({clock_, MonotonicNs()});
  next_time_sync_ = summary_.instructions + kTimeSyncEvery;
}

}  // namespace ptscope::emulate
