// The traced program: started by us (run mode) or already running (-p). Run mode starts the
// child stopped at its exec (PTRACE_TRACEME) so that events, /proc synthesis and the trigger
// address are set up before its first instruction, then detaches: after Resume() the child is
// not a tracee, and nothing pt-record does (including dying) stops or kills it. If setup fails
// before Resume(), the child is killed before it executed a single instruction of its own.
#pragma once

#include <signal.h>

#include <optional>
#include <string>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::record {

class Target {
 public:
  // fork + PTRACE_TRACEME + execvp; returns once the child is stopped right after exec.
  // `child_sigmask` is restored in the child before exec (pt-record blocks its signals).
  static Result<Target> Launch(const std::vector<std::string>& argv, const sigset_t& child_sigmask);
  // Processes that already run; each must exist.
  static Result<Target> Attach(const std::vector<int>& pids);
  Target() = default;
  Target(Target&& other) noexcept;
  Target& operator=(Target&& other) noexcept;
  Target(const Target&) = delete;
  ~Target();

  const std::vector<int>& pids() const { return pids_; }
  bool launched() const { return child_ > 0; }
  // Lets a launched child run (PTRACE_DETACH). No-op for attached processes.
  Status Resume();
  // True once every target process has exited (reaps a launched child; WNOHANG).
  bool Exited();
  // Exit status of a launched child (as from waitpid), once Exited().
  std::optional<int> wait_status() const { return wait_status_; }
  // Descriptors that become readable when an attached process exits (pidfds) for poll().
  const std::vector<int>& exit_fds() const { return pidfds_; }
  // /proc/PID/exe of the first target.
  Result<std::string> ExePath() const;

 private:
  std::vector<int> pids_;
  int child_ = -1;
  bool resumed_ = false;
  std::optional<int> wait_status_;
  std::vector<int> pidfds_;
};

// Parses "123,456" into pids (for -p).
Result<std::vector<int>> ParsePidList(const std::string& text);

}  // namespace ptscope::record
