// Test doubles for the stack tracker and sinks: CodeFacts and a FrameNamer over a table of
// functions, and a SliceSink that prints the slice tree it receives (and checks nesting and time order).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "events.h"

namespace ptscope::decode::testing {

// A flow event as the decoder makes it; a call is 5 bytes long (its return address is from + 5).
inline FlowEvent Ev(FlowEvent::Kind kind, uint64_t t, uint64_t from, uint64_t to,
                    uint64_t insns = 0) {
  FlowEvent e;
  e.kind = kind;
  e.time_ns = t;
  e.from = from;
  e.to = to;
  e.insn_count = insns;
  if (kind == FlowEvent::Kind::kCall) e.call_size = 5;
  return e;
}

// Functions at fixed addresses. Each function spans [start, start + 0x100).
struct FakeFunction {
  std::string name;
  uint64_t start;
  bool has_debug_info = true;  // without: no file or line, only the module
};

class FakeNamer : public CodeFacts, public FrameNamer {
 public:
  explicit FakeNamer(std::vector<FakeFunction> functions) : functions_(std::move(functions)) {}
  // Call site `address` shows these inlined frames (outermost first).
  void AddInlined(uint64_t address, std::vector<FrameName::Inlined> frames) {
    inlined_[address] = std::move(frames);
  }
  FrameName Name(uint32_t pid, uint64_t address, uint64_t time_ns) override;
  uint64_t FunctionStart(uint32_t pid, uint64_t address, uint64_t time_ns) override;
  // The AddInlined frames' count at `address` (not counted in name_calls).
  uint32_t InlineDepth(uint32_t pid, uint64_t address, uint64_t time_ns) override;
  bool IsProgramEntry(uint32_t, uint64_t address, uint64_t) override {
    return program_entry != 0 && address == program_entry;
  }

  std::map<uint64_t, int> name_calls;  // address -> number of Name() calls
  uint64_t program_entry = 0;          // IsProgramEntry's address (0: none)

 private:
  const FakeFunction* Find(uint64_t address) const;
  std::vector<FakeFunction> functions_;
  std::map<uint64_t, std::vector<FrameName::Inlined>> inlined_;
};

// Prints one line per slice, indented by depth: "name[*] start-end" (* = inferred, inlined
// slices print as "name (inlined)"), instants as "! text @time". Records protocol violations.
class TreeSink : public SliceSink {
 public:
  explicit TreeSink(FrameNamer& namer) : namer_(namer) {}
  void BeginThread(const ThreadKey&, const std::string&, const std::string&) override {}
  void Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
             bool inferred) override;
  void End(const ThreadKey& thread, uint64_t time_ns) override;
  void Instant(const ThreadKey& thread, uint64_t time_ns, const std::string& text) override;
  void Finish() override {}

  std::string Tree() const;
  std::vector<std::string> violations;
  size_t max_depth = 0;

 private:
  void CheckTime(uint64_t t);
  FrameNamer& namer_;
  std::vector<std::string> lines_;
  std::vector<std::pair<size_t, uint64_t>> open_;  // line index, start
  uint64_t last_time_ = 0;
};

}  // namespace ptscope::decode::testing
