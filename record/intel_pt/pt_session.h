// One pt-record capture from start to archive: target control, perf events (sideband dummy,
// intel_pt, trigger breakpoints), the event loop, snapshots, privilege drop and archive writing.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "host_info.h"
#include "pt_config.h"
#include "pt_trigger.h"
#include "ptscope/result.h"

namespace ptscope::record {

struct RecordOptions {
  enum class Mode { kRun, kAttach, kAllCpus } mode = Mode::kRun;
  std::vector<std::string> argv;  // run mode
  std::vector<int> pids;          // -p
  std::string output;
  bool full = false;
  uint64_t aux_bytes = 0;         // per PT event (power of two pages); 0 = default
  bool sideband_only = false;
  bool embed_binaries = false;
  PtOptions pt;
  std::string filter;             // --filter text
  std::optional<TriggerSpec> trigger;
  bool multi_snapshot = false;
  std::optional<double> duration_s;
  std::string command_line;       // for the `command` metadata
};

struct RecordSummary {
  std::string reason;             // trigger.reason
  uint64_t pt_bytes = 0;
  uint64_t sideband_bytes = 0;
  uint32_t snapshots = 0;
  uint32_t modules = 0;
  uint64_t archive_bytes = 0;
  std::optional<int> target_wait_status;
  std::vector<std::string> warnings;
};

// Default AUX size: 4 MiB when the mlock limit does not apply, else 256 KiB (magic-trace's).
uint64_t DefaultAuxBytes(const HostFacts& facts);
// "4M", "256K", "1G", "65536" → bytes, rounded up to a power-of-two number of pages.
Result<uint64_t> ParseBufferSize(const std::string& text);

// `note` receives progress lines meant for stderr (only main prints).
Result<RecordSummary> RunRecording(const RecordOptions& options, const HostFacts& facts,
                                   const std::function<void(const std::string&)>& note);

}  // namespace ptscope::record
