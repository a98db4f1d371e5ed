// The traced program: started by the session (run mode) or already running (-p).
//
// Run mode starts the child stopped right after its exec, before its first instruction, so that
// tracing is set up before anything runs. Two ways, for the two PT sources:
//  - kStoppedAtExec (pt-record): PTRACE_TRACEME; Resume() detaches it, after which the child is
//    not a tracee and nothing pt-record does (including dying) stops or kills it;
//  - kSeized (pt-emulate): PTRACE_SEIZE with the given options, ending at PTRACE_EVENT_EXEC; the
//    single-step source then drives it (and reaps it).
// If setup fails before the child is handed on, the child is killed before it executed a single
// instruction of its own.
// A set-uid (or set-gid) recorder's child drops to the invoking user's ids before exec: the
// program runs as the user who started the recorder, never as root.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::record {

struct LaunchOptions {
  enum class Control { kStoppedAtExec, kSeized } control = Control::kStoppedAtExec;
  unsigned ptrace_options = 0;  // kSeized: PTRACE_O_* for PTRACE_SEIZE
  sigset_t child_sigmask{};     // restored in the child before exec (recorders block signals)
};

class Target {
 public:
  static Result<Target> Launch(const std::vector<std::string>& argv, const LaunchOptions& options);
  // Processes that already run; each must exist.
  static Result<Target> Attach(const std::vector<int>& pids);
  Target() = default;
  Target(Target&& other) noexcept;
  Target& operator=(Target&& other) noexcept;
  Target(const Target&) = delete;
  ~Target();

  const std::vector<int>& pids() const { return pids_; }
  bool launched() const { return child_ > 0; }
  // Lets a launched child run: kStoppedAtExec detaches it; kSeized marks it handed over to the
  // source that traces it (which resumes and reaps it). No-op for attached processes.
  Status Resume();
  // True once every target process has exited (reaps a kStoppedAtExec child; WNOHANG). Not for
  // a seized child: its tracer sees its exit.
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
  bool seized_ = false;
  bool resumed_ = false;
  std::optional<int> wait_status_;
  std::vector<int> pidfds_;
};

// Parses "123,456" into pids (for -p).
Result<std::vector<int>> ParsePidList(const std::string& text);

}  // namespace ptscope::record
