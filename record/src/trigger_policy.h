// When to take snapshots and stop, for every recorder: signals, target exit, --duration, a
// source's own limit (pt-emulate --max-instructions) and --trigger (an address or symbol of the
// target: a hardware execute breakpoint under pt-record, an instruction address under
// pt-emulate). The decisions are a pure function of the stimulus and the mode, and the trigger
// address is resolved from the target's ELF and maps, so both are unit-tested without hardware.
#pragma once

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
  std::string text;      // as the user wrote it (the trigger marker's text)
  std::string module;    // MODULE:SYMBOL: only the mapped file with this path or file name
  std::string option = "--trigger";  // the option it came from, for messages
};
// "NAME", "symbol:NAME", "MODULE:NAME" (libc.so.6:write), "0x401000", "addr:0x401000".
// `option` names the option in messages (pt-emulate's --start-at takes the same forms).
Result<TriggerSpec> ParseTriggerSpec(const std::string& text, const std::string& option = "--trigger");

struct ResolvedTrigger {
  uint64_t address = 0;  // where the breakpoint goes in the target
  std::string where;     // "main in /usr/bin/prog" for messages and the Trigger marker
};
// Looks a symbol up in `exe_path` and then in the other executable file mappings of `maps` (only
// the spec's module, if it names one), and places it at its runtime address through the mapping
// that holds its file offset. A library not mapped yet is not found: call again once it is.
Result<ResolvedTrigger> ResolveTrigger(const TriggerSpec& spec, const std::string& exe_path,
                                       const std::vector<MapEntry>& maps);

enum class Stimulus {
  kInterrupt, kTerminate, kUsr2, kTargetExit, kDuration, kTriggerHit,
  kInstructionLimit,  // pt-emulate --max-instructions
};
const char* StimulusName(Stimulus stimulus);

struct TriggerAction {
  bool snapshot = false;  // copy the AUX ring out now (snapshot mode only)
  bool stop = false;      // finish the capture
  std::string reason;     // trigger.reason: exit|signal|usr2|trigger|duration|max-instructions
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
