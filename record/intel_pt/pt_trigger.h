// When to take snapshots and stop: signals, target exit, --duration, and --trigger (a hardware
// execute breakpoint at a symbol or address of the target). The decisions are a pure function of
// the stimulus and the mode, and the trigger address is resolved from the target's ELF and maps,
// so both are unit-tested without breakpoint hardware.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <string>
#include <vector>

#include "proc_maps.h"
#include "ptscope/result.h"

namespace ptscope::record {

struct TriggerSpec {
  enum class Kind { kSymbol, kAddress } kind = Kind::kSymbol;
  std::string symbol;    // mangled name, as in the ELF symbol table
  uint64_t address = 0;  // runtime address (kAddress)
};
// "NAME", "symbol:NAME", "0x401000", "addr:0x401000".
Result<TriggerSpec> ParseTriggerSpec(const std::string& text);

struct ResolvedTrigger {
  uint64_t address = 0;  // where the breakpoint goes in the target
  std::string where;     // "main in /usr/bin/prog" for messages and the Trigger marker
};
// Looks a symbol up in `exe_path` and then in the other executable file mappings of `maps`, and
// places it at its runtime address through the mapping that holds its file offset.
Result<ResolvedTrigger> ResolveTrigger(const TriggerSpec& spec, const std::string& exe_path,
                                       const std::vector<MapEntry>& maps);

// PERF_TYPE_BREAKPOINT / HW_BREAKPOINT_X at `address`, one sample per hit (TID|TIME|IP).
perf_event_attr BuildBreakpointAttr(uint64_t address);

enum class Stimulus { kInterrupt, kTerminate, kUsr2, kTargetExit, kDuration, kTriggerHit };
const char* StimulusName(Stimulus stimulus);

struct TriggerAction {
  bool snapshot = false;  // copy the AUX ring out now (snapshot mode only)
  bool stop = false;      // finish the capture
  std::string reason;     // trigger.reason metadata: exit|signal|usr2|trigger|duration
};

class TriggerPolicy {
 public:
  TriggerPolicy(bool snapshot_mode, bool multi_snapshot)
      : snapshot_mode_(snapshot_mode), multi_snapshot_(multi_snapshot) {}
  TriggerAction On(Stimulus stimulus);
  uint32_t snapshots_taken() const { return snapshots_taken_; }

 private:
  bool snapshot_mode_;
  bool multi_snapshot_;
  uint32_t snapshots_taken_ = 0;
  uint32_t trigger_hits_ = 0;
};

}  // namespace ptscope::record
