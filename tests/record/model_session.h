// Running pt-record's real session (RunSession + KernelPtSource) against the kernel model: the
// host facts the source sees, a real target process, and the archive it wrote.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "host_info.h"
#include "kernel_model.h"
#include "kernel_source.h"
#include "ptscope/format.h"
#include "session.h"
#include "../support/temp_dir.h"

namespace ptscope::record::testing {

// A Tiger Lake with Intel PT, as the model's host describes it.
inline HostFacts ModelFacts(const ModelHost& host, bool root) {
  HostFacts f;
  f.cpu.vendor = "GenuineIntel";
  f.cpu.family = 6;
  f.cpu.model = 140;
  f.cpu.stepping = 1;
  f.cpu.has_intel_pt = true;
  f.pt.present = true;
  f.pt.type = host.pt_type;
  f.pt.caps = {{"psb_cyc", "1"},        {"mtc", "1"},
               {"mtc_periods", "249"},  {"cycle_thresholds", "3fff"},
               {"psb_periods", "3f"},   {"ip_filtering", "1"},
               {"num_address_ranges", std::to_string(host.num_address_ranges)}};
  f.pt.max_nonturbo_ratio = 28;
  f.kernel_release = std::to_string(host.kernel_major) + "." + std::to_string(host.kernel_minor) +
                     ".0-model";
  f.host_name = "model";
  f.perf_event_paranoid = host.paranoid;
  f.perf_event_mlock_kb = host.perf_event_mlock_kb;
  f.privileges.uid = f.privileges.euid = root ? 0 : 1000;
  if (host.cap_ipc_lock) f.privileges.cap_effective |= uint64_t{1} << 14;
  if (host.perfmon) f.privileges.cap_effective |= uint64_t{1} << 38;
  for (int c = 0; c < host.ncpus; ++c) f.online_cpus.push_back(c);
  return f;
}

using TempDir = ptscope::testing::TempDir;

// A run of the session against `model`. The target is a real process (run mode: `argv`).
struct ModelRun {
  // `root`: the recorder runs as root, which the kernel treats as CAP_IPC_LOCK and CAP_PERFMON.
  explicit ModelRun(KernelModel& m, bool root = true) : model(m) {
    if (root) model.host().cap_ipc_lock = model.host().perfmon = true;
    facts = ModelFacts(model.host(), root);
    session.output = dir / "capture.ptar";
    session.tool_version = "test";
    session.command_line = "pt-record (model)";
  }

  Result<SessionSummary> Run() {
    KernelPtSource source(model, facts, source_options, [this](const std::string& line) {
      notes.push_back(line);
    });
    return RunSession(session, source);
  }

  // The target's pid: the first task an event was opened for.
  int TargetPid() const {
    for (int fd : model.Fds()) {
      if (model.Event(fd)->pid > 0) return model.Event(fd)->pid;
    }
    return -1;
  }

  KernelModel& model;
  HostFacts facts;
  SessionOptions session;
  KernelSourceOptions source_options;
  std::vector<std::string> notes;
  TempDir dir{"ptscope-model"};
};

// The archive at `path`, which must read back complete.
inline format::Archive ReadComplete(const std::string& path) {
  auto archive = format::ReadArchive(path);
  if (!archive) throw std::runtime_error(archive.error().message);
  if (!archive->complete) throw std::runtime_error(path + ": incomplete");
  return std::move(*archive);
}

// Kills and reaps a target left running.
inline void KillTarget(int pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

}  // namespace ptscope::record::testing
