#include "pt_target.h"

#include <fcntl.h>
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

// Child side of Launch: never returns. Reports a failure as (stage, errno) on `report_fd`.
[[noreturn]] void ExecChild(const std::vector<std::string>& argv, const sigset_t& mask,
                            int report_fd) {
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  int report[2] = {0, 0};
  if (ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) {
    report[0] = 1;
    report[1] = errno;
  } else {
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

Result<Target> Target::Launch(const std::vector<std::string>& argv, const sigset_t& child_sigmask) {
  if (argv.empty()) return MakeError(Errc::kInvalidArgument, "no PROGRAM given after --");
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0)
    return MakeError(Errc::kIo, std::string("pipe2 failed: ") + std::strerror(errno));
  pid_t child = fork();
  if (child < 0) {
    close(report[0]);
    close(report[1]);
    return MakeError(Errc::kIo, std::string("fork failed: ") + std::strerror(errno));
  }
  if (child == 0) {
    close(report[0]);
    ExecChild(argv, child_sigmask, report[1]);
  }
  close(report[1]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  int failure[2] = {0, 0};
  ssize_t n = read(report[0], failure, sizeof failure);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof failure)) {
    if (WIFSTOPPED(status)) waitpid(child, &status, 0);  // cannot happen; reap anyway
    if (failure[0] == 1)
      return MakeError(Errc::kPermission, std::string("cannot start ") + argv[0] +
                                              " stopped at exec: ptrace(PTRACE_TRACEME): " +
                                              std::strerror(failure[1]) +
                                              " (ptrace is restricted here: start the program "
                                              "yourself and use -p PID)");
    return MakeError(failure[1] == ENOENT ? Errc::kNotFound : Errc::kIo,
                     std::string("cannot run ") + argv[0] + ": " + std::strerror(failure[1]));
  }
  if (!WIFSTOPPED(status))
    return MakeError(Errc::kInternal, std::string(argv[0]) + " did not stop at exec (status " +
                                          std::to_string(status) + ")");
  Target target;
  target.child_ = child;
  target.pids_ = {child};
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
  std::string link = ProcDir(pids_.front()) + "/exe";
  char buf[4096];
  ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0)
    return MakeError(Errc::kPermission, link + ": " + std::strerror(errno));
  std::string path(buf, static_cast<size_t>(n));
  const std::string deleted = " (deleted)";
  if (path.size() > deleted.size() && path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
    path.resize(path.size() - deleted.size());
  return path;
}

}  // namespace ptscope::record
