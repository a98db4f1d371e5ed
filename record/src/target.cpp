#include "target.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include "proc_maps.h"

namespace ptscope::record {
namespace {

// A set-uid or set-gid recorder keeps its privileges for perf_event_open; the program it runs
// must not: it gets the invoking user's ids (which also clears every capability the ids gave).
// Returns the errno of a failed drop, else 0.
int DropToRealIds() {
  const gid_t gid = getgid();
  const uid_t uid = getuid();
  if (getegid() != gid && setresgid(gid, gid, gid) != 0) return errno;
  if (geteuid() != uid && setresuid(uid, uid, uid) != 0) return errno;
  return 0;
}

// Child side of Launch: never returns. Reports a failure as (stage, errno) on `report_fd`.
[[noreturn]] void ExecChild(const std::vector<std::string>& argv, const LaunchOptions& options,
                            int report_fd, pid_t parent) {
  sigprocmask(SIG_SETMASK, &options.child_sigmask, nullptr);
  int report[2] = {0, 0};
  if (int err = DropToRealIds(); err != 0) {
    report[0] = 3;
    report[1] = err;
  } else if (options.control == LaunchOptions::Control::kStoppedAtExec &&
             ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) {
    report[0] = 1;
    report[1] = errno;
  } else {
    // kSeized: wait here until the parent has seized us (it sends SIGCONT). Should the parent
    // die before it seizes us (killed at start-up), a child left stopped here would stay stopped
    // for good, orphaned, holding the parent's stdout and stderr open; so until the seize (whose
    // PTRACE_O_EXITKILL takes over) the parent's death kills us. Cleared before exec: a program
    // the recorder lets go when it stops must outlive it.
    if (options.control == LaunchOptions::Control::kSeized) {
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
      raise(SIGSTOP);
      prctl(PR_SET_PDEATHSIG, 0);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    report[0] = 2;
    report[1] = errno;
  }
  ssize_t ignored = write(report_fd, report, sizeof report);
  (void)ignored;
  _exit(127);
}

Error LaunchFailure(const std::string& program, const int failure[2]) {
  if (failure[0] == 1)
    return MakeError(Errc::kPermission, "cannot start " + program +
                                            " stopped at exec: ptrace(PTRACE_TRACEME): " +
                                            std::strerror(failure[1]) +
                                            " (ptrace is restricted here: start the program "
                                            "yourself and use -p PID)");
  if (failure[0] == 3)
    return MakeError(Errc::kPermission, "cannot run " + program + " as the invoking user: " +
                                            std::strerror(failure[1]));
  return MakeError(failure[1] == ENOENT ? Errc::kNotFound : Errc::kIo,
                   "cannot run " + program + ": " + std::strerror(failure[1]));
}

Error SeizeFailure(pid_t pid) {
  const int err = errno;
  if (err == EPERM || err == EACCES)
    return MakeError(Errc::kPermission,
                     "cannot trace child " + std::to_string(pid) + ": " + std::strerror(err) +
                         " (ptrace is restricted: run as root or with CAP_SYS_PTRACE, set "
                         "/proc/sys/kernel/yama/ptrace_scope to 0, or allow ptrace in the "
                         "container's seccomp profile)");
  return MakeError(Errc::kIo, "cannot trace child " + std::to_string(pid) + ": " +
                                  std::strerror(err));
}

// kSeized: seizes the child stopped by its own SIGSTOP, lets it run (untraced in effect, no
// stepping yet) until its exec completes, and leaves it stopped at PTRACE_EVENT_EXEC.
Status SeizeUntilExec(pid_t pid, unsigned ptrace_options, int report_fd,
                      const std::string& program, bool* reaped) {
  int status = 0;
  if (waitpid(pid, &status, WSTOPPED) != pid || !WIFSTOPPED(status))
    return MakeError(Errc::kInternal, "the child process did not start");
  if (ptrace(PTRACE_SEIZE, pid, nullptr, ptrace_options) != 0) return SeizeFailure(pid);
  kill(pid, SIGCONT);
  for (;;) {
    if (waitpid(pid, &status, __WALL) != pid) {
      if (errno == EINTR) continue;
      return MakeError(Errc::kInternal, "waitpid on the child failed");
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      *reaped = true;
      int failure[2] = {2, 0};
      const bool got = read(report_fd, failure, sizeof failure) == sizeof failure;
      if (!got) return MakeError(Errc::kNotFound, "cannot run " + program + ": it exited before exec");
      return LaunchFailure(program, failure);
    }
    if ((status >> 16) == PTRACE_EVENT_EXEC) return Ok();
    const int sig = WSTOPSIG(status);
    const bool deliver = (status >> 16) == 0 && sig != SIGCONT && sig != SIGSTOP;
    ptrace(PTRACE_CONT, pid, nullptr, deliver ? sig : 0);
  }
}

}  // namespace

Result<std::vector<int>> ParsePidList(const std::string& text) {
  std::vector<int> pids;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int pid = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), pid);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || pid <= 0)
      return MakeError(Errc::kInvalidArgument,
                       "-p '" + text + "': '" + item + "' is not a process id");
    pids.push_back(pid);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return pids;
}

Result<Target> Target::Launch(const std::vector<std::string>& argv, const LaunchOptions& options) {
  if (argv.empty()) return MakeError(Errc::kInvalidArgument, "no PROGRAM given after --");
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0)
    return MakeError(Errc::kIo, std::string("pipe2 failed: ") + std::strerror(errno));
  const pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) {
    close(report[0]);
    close(report[1]);
    return MakeError(Errc::kIo, std::string("fork failed: ") + std::strerror(errno));
  }
  if (child == 0) {
    close(report[0]);
    ExecChild(argv, options, report[1], parent);
  }
  close(report[1]);
  Target target;  // from here on, a failure kills the child (it has not run yet)
  target.child_ = child;
  target.pids_ = {child};
  target.seized_ = options.control == LaunchOptions::Control::kSeized;
  if (target.seized_) {
    bool reaped = false;
    Status seized = SeizeUntilExec(child, options.ptrace_options, report[0], argv[0], &reaped);
    close(report[0]);
    if (reaped) target.child_ = -1;
    if (!seized) return std::move(seized).error();
    return target;
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  int failure[2] = {0, 0};
  ssize_t n = read(report[0], failure, sizeof failure);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof failure)) {
    target.child_ = -1;  // it exited with 127 and was reaped above
    return LaunchFailure(argv[0], failure);
  }
  if (!WIFSTOPPED(status))
    return MakeError(Errc::kInternal, std::string(argv[0]) + " did not stop at exec (status " +
                                          std::to_string(status) + ")");
  return target;
}

Result<Target> Target::Attach(const std::vector<int>& pids) {
  Target target;
  for (int pid : pids) {
    if (kill(pid, 0) != 0 && errno == ESRCH)
      return MakeError(Errc::kNotFound, "-p " + std::to_string(pid) + ": no such process");
    long fd = syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) target.pidfds_.push_back(static_cast<int>(fd));
    target.pids_.push_back(pid);
  }
  return target;
}

Target::Target(Target&& other) noexcept { *this = std::move(other); }

Target& Target::operator=(Target&& other) noexcept {
  if (this != &other) {
    pids_ = std::move(other.pids_);
    child_ = std::exchange(other.child_, -1);
    seized_ = other.seized_;
    resumed_ = std::exchange(other.resumed_, false);
    wait_status_ = other.wait_status_;
    pidfds_ = std::move(other.pidfds_);
    other.pidfds_.clear();
  }
  return *this;
}

Target::~Target() {
  // A launched child we never resumed is still stopped at exec, before its first instruction:
  // setup failed, so the program must not run untraced as if the capture were happening.
  if (child_ > 0 && !resumed_) {
    kill(child_, SIGKILL);
    int status = 0;
    while (waitpid(child_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  for (int fd : pidfds_) close(fd);
}

Status Target::Resume() {
  if (child_ <= 0 || resumed_) return Ok();
  if (seized_) {  // its tracer (the single-step source) resumes it
    resumed_ = true;
    return Ok();
  }
  if (ptrace(PTRACE_DETACH, child_, nullptr, nullptr) != 0)
    return MakeError(Errc::kInternal, "PTRACE_DETACH of " + std::to_string(child_) + " failed: " +
                                          std::strerror(errno));
  resumed_ = true;
  return Ok();
}

bool Target::Exited() {
  if (child_ > 0) {
    if (wait_status_) return true;
    int status = 0;
    pid_t r = waitpid(child_, &status, WNOHANG);
    if (r == child_ && (WIFEXITED(status) || WIFSIGNALED(status))) wait_status_ = status;
    return wait_status_.has_value();
  }
  for (int pid : pids_) {
    if (kill(pid, 0) == 0 || errno != ESRCH) {
      // A zombie still answers kill(); /proc/PID/stat state Z means it is gone for us.
      auto stat = ReadProcFile(ProcDir(pid) + "/stat");
      if (!stat) continue;
      size_t paren = stat->rfind(')');
      if (paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] == 'Z')
        continue;
      return false;
    }
  }
  return true;
}

Result<std::string> Target::ExePath() const {
  if (pids_.empty()) return MakeError(Errc::kNotFound, "no target process");
  return ProcessExePath(pids_.front());
}

}  // namespace ptscope::record
