// --time-range: a SliceSink decorator that keeps only what happens inside [from_ns, to_ns].
// The stack tracker still sees the whole decoded stretch (so stacks are right at the window's
// start); slices that began before the window start at from_ns, slices still open at its end
// end at to_ns, and everything entirely outside is dropped.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "events.h"

namespace ptscope::decode {

class WindowSink : public SliceSink {
 public:
  WindowSink(SliceSink& inner, uint64_t from_ns, uint64_t to_ns)
      : inner_(inner), from_(from_ns), to_(to_ns) {}
  void BeginThread(const ThreadKey& thread, const std::string& process_name,
                   const std::string& thread_name) override;
  void Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
             bool inferred) override;
  void End(const ThreadKey& thread, uint64_t time_ns) override;
  void Instant(const ThreadKey& thread, uint64_t time_ns, const std::string& text) override;
  void WriteRecords(const ThreadKey& thread, const SliceRecord* records, size_t count) override;
  bool WantsEveryLevel() const override { return inner_.WantsEveryLevel(); }
  void SetCaptureTotals(const DecodeSummary& totals) override { inner_.SetCaptureTotals(totals); }
  void Finish() override { inner_.Finish(); }
  std::string OutputError() const override { return inner_.OutputError(); }

 private:
  struct Open {
    SliceRecord begin;
    bool emitted;
  };
  // Appends to out_ what `record` becomes inside the window.
  void Process(const SliceRecord& record);
  // Queues the not yet emitted slices that began before the window, at its start.
  void EmitPending(uint64_t instructions);
  void Send(const ThreadKey& thread);
  SliceSink& inner_;
  uint64_t from_, to_;
  // Open slices per thread (pid << 32 | tid): the threads of per-CPU streams interleave.
  std::unordered_map<uint64_t, std::vector<Open>> open_by_thread_;
  std::vector<Open>* open_ = nullptr;  // the thread of the records being processed
  std::vector<SliceRecord> out_;
};

}  // namespace ptscope::decode
