// Where a recording session's PT bytes come from. The session (session.h) owns everything else —
// the target, the archive, triggers and the stop policy, snapshots, signals, privileges — and
// drives a source through this narrow interface:
//  - the hardware source (record/intel_pt): perf_event_open on intel_pt, the AUX ring, and the
//    kernel's sideband events;
//  - the single-step source (tools/emulate, which pt-record does not link): ptrace single-steps
//    the target and encodes the PT the hardware would have written.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "capture_writer.h"
#include "ptscope/result.h"
#include "target.h"
#include "trigger_policy.h"

namespace ptscope::record {

using MetadataEntries = std::vector<std::pair<std::string, std::string>>;

// What a source knows once it is open, before the archive exists.
struct SourceDescription {
  std::string tool;                // metadata "tool": pt-record, pt-emulate
  std::string capture_mode;        // metadata "capture.mode" when not snapshot/full
  uint64_t features = 0;           // archive feature bits of the source (emulated, per-cpu)
  MetadataEntries metadata;        // cpu.*, pt.*, time.*, emulate.* ...
  std::vector<uint64_t> sideband_ids = {kBuiltRecordSampleId};  // the SidebandAttr's ids
  std::vector<uint8_t> raw_attr;   // the sideband attr as passed to the kernel, if any
};

// What happened while a source ran, for the session's policy to act on.
struct SourceEvents {
  bool target_gone = false;        // every traced process has exited
  bool trigger_hit = false;        // the trigger address executed
  uint64_t trigger_address = 0;
  bool instruction_limit = false;  // the source's own limit (pt-emulate --max-instructions)
};

// The session's choices a source needs.
struct SourceSettings {
  enum class Mode { kRun, kAttach, kAllCpus } mode = Mode::kRun;
  bool snapshot = true;  // snapshot rings (else every byte, "full")
  const TriggerSpec* trigger = nullptr;
};

class PtSource {
 public:
  virtual ~PtSource() = default;
  // How run mode starts the program.
  virtual LaunchOptions launch_options() const = 0;
  // Prepares tracing of `target` (launched and stopped at its exec, or attached, or none with
  // -a): opens events, resolves the trigger. Nothing is written and nothing runs yet; a failure
  // here leaves no archive behind.
  virtual Result<SourceDescription> Open(Target& target, const SourceSettings& settings) = 0;
  // Writes what existed before tracing began (process state, vdso) through `capture`, starts
  // tracing and lets the target run (Target::Resume).
  virtual Status Start(CaptureWriter& capture) = 0;
  // Traces until `deadline_ns` (CLOCK_MONOTONIC) or until something the session must act on
  // (an event, or a signal for the session: SessionSignals::Pending()), writing PT and sideband
  // as it goes.
  virtual Result<SourceEvents> Run(uint64_t deadline_ns) = 0;
  // Snapshot mode: copies what the rings hold as snapshot `index`; `final`: the capture ends
  // with it (tracing does not resume).
  virtual Status Snapshot(uint32_t index, bool final) = 0;
  // Ends tracing: writes what is still buffered; the target goes on, untraced and unharmed.
  virtual Status Finish() = 0;
  // Ends tracing after an error, leaving the target running as if never traced. Best effort.
  virtual void Abort() = 0;
  // The source's clock (TSC, or pt-emulate's virtual TSC), for markers.
  virtual uint64_t NowTsc() = 0;
  // Metadata known only at the end (perf's time fields, once the kernel filled them).
  virtual MetadataEntries EndMetadata() { return {}; }
  // Problems that did not stop the capture, for the summary.
  virtual std::vector<std::string> TakeWarnings() { return {}; }
};

}  // namespace ptscope::record
