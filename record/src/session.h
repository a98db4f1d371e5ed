// One recording session, the same for pt-record and pt-emulate: start or attach to the target,
// create the archive as the invoking user, let the PT source trace, act on signals, --duration,
// the trigger and the target's exit (TriggerPolicy), take snapshots, and finish the archive.
// Only where the PT bytes come from differs (pt_source.h).
#pragma once

#include <signal.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pt_source.h"
#include "ptscope/result.h"
#include "trigger_policy.h"

namespace ptscope::record {

struct SessionOptions {
  SourceSettings::Mode mode = SourceSettings::Mode::kRun;
  std::vector<std::string> argv;  // run mode
  std::vector<int> pids;          // -p
  std::string output;
  bool snapshot = true;           // --full clears it
  bool embed_binaries = false;
  std::optional<TriggerSpec> trigger;
  bool multi_snapshot = false;
  std::optional<double> duration_s;
  std::string command_line;       // for the `command` metadata
  std::string tool_version;
  // Give up every privilege once the source is open (pt-record: its events are open and mapped).
  bool drop_privileges = false;
};

struct SessionSummary {
  std::string reason;  // trigger.reason
  uint64_t pt_bytes = 0;
  uint64_t sideband_bytes = 0;
  uint32_t snapshots = 0;
  uint32_t modules = 0;
  uint64_t archive_bytes = 0;
  std::vector<std::string> warnings;
};

// Runs the whole capture. On an error after the archive was created, the archive keeps
// everything written so far (it reads back incomplete) and the target is left running.
Result<SessionSummary> RunSession(const SessionOptions& options, PtSource& source);

// The signals a session acts on: SIGINT/SIGTERM (snapshot, stop), SIGUSR2 (snapshot, go on).
// They stay blocked except while a source waits (ppoll with WaitMask(), or waitpid with them
// unblocked), so a request is never lost between a check and a wait.
class SessionSignals {
 public:
  SessionSignals();   // installs the handlers and blocks the signals
  ~SessionSignals();  // restores both
  SessionSignals(const SessionSignals&) = delete;
  SessionSignals& operator=(const SessionSignals&) = delete;

  // A stop or snapshot request arrived and was not yet taken.
  static bool Pending();
  // The mask to wait with: the process's mask without the session's signals (and SIGCHLD).
  static const sigset_t& WaitMask();
  // The mask the target gets back before exec.
  static const sigset_t& ChildMask();
  // The requests since the last call.
  struct Requests {
    bool interrupt = false, terminate = false, usr2 = false;
  };
  static Requests Take();
};

}  // namespace ptscope::record
