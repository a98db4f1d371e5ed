// SummarySink (--summary): per-function totals instead of slices, the fast overview of a capture.
//
// For every function (each slice name: functions, inlined functions, [syscall], [untraced]) it
// counts, per thread and over all threads:
//   calls       slices begun
//   total_ns    inclusive time: time with the function anywhere on the stack; recursive calls
//               are counted once (only the outermost activation adds its duration)
//   self_ns     time with the function on top of the stack
//   max_ns      the longest single call (inclusive)
//   insns, self_insns   the same two for retired instructions, when the producer reports them
//                       (SliceRecord::instructions; the StackTracker does); else the columns
//                       are left out
// Slices still open when a thread ends are closed at the thread's last time.
//
// Output (written at Finish), as text: a header, the table over all threads, then one table per
// thread in (pid, tid) order; as JSON (`--summary --format json`): the same tables and the
// decode's totals (SetCaptureTotals), in the schema docs/DECODE_JSON.md specifies (its version is
// kSummaryJsonVersion). Rows are sorted by total_ns, then calls (both descending), then name and
// module, so the output is deterministic. `top` (0 = all) limits the rows per table.
// Rows merge slices with the same name, inlined flag and module: in the table over all threads
// the same function in several processes is one row. Memory grows with the number of distinct
// functions and the stack depth, not with the trace length.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "events.h"
#include "sink/frame_name_cache.h"
#include "sink/output_file.h"
#include "flat_map.h"

namespace ptscope::decode {

inline constexpr int kSummaryJsonVersion = 1;

class SummarySink : public SliceSink {
 public:
  enum class Encoding { kText, kJson };
  SummarySink(std::unique_ptr<OutputFile> out, FrameNamer& namer, size_t top = 0,
              Encoding encoding = Encoding::kText);

  void BeginThread(const ThreadKey& thread, const std::string& process_name,
                   const std::string& thread_name) override;
  void Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
             bool inferred) override;
  void End(const ThreadKey& thread, uint64_t time_ns) override;
  void Instant(const ThreadKey& thread, uint64_t time_ns, const std::string&) override;
  void WriteRecords(const ThreadKey& thread, const SliceRecord* records, size_t count) override;
  bool WantsEveryLevel() const override { return true; }
  void SetCaptureTotals(const DecodeSummary& totals) override;
  void Finish() override;
  std::string OutputError() const override { return error_; }

  // One row of a table (public for the table writer).
  struct Totals {
    uint64_t calls = 0, total_ns = 0, self_ns = 0, max_ns = 0, insns = 0, self_insns = 0;
    void Add(const Totals& other);
  };

 private:
  struct FrameIdHash {
    uint64_t operator()(const FrameId& f) const {
      return (f.address ^ (uint64_t{f.inline_index} << 40) ^ (uint64_t(f.kind) << 58)) *
             0x9e3779b97f4a7c15ull;
    }
  };
  struct Function {
    FrameId frame;
    uint64_t first_time = 0;  // when it was first seen (names use the mappings of that time)
    uint32_t active = 0;      // activations open on the stack (recursion)
    uint64_t outer_start_ns = 0, outer_start_insns = 0;
    Totals totals;
  };
  struct OpenSlice {
    uint32_t function;
    uint64_t start_ns, start_insns;
    uint64_t child_ns = 0, child_insns = 0;
  };
  struct ThreadState {
    ThreadKey key;
    std::string process_name, thread_name;
    FlatMap<FrameId, uint32_t, FrameIdHash> index;  // frame -> functions index + 1
    std::vector<Function> functions;
    std::vector<OpenSlice> open;
    uint64_t last_time = 0, last_insns = 0;
  };

  ThreadState& StateFor(const ThreadKey& thread);
  void BeginLocked(ThreadState& state, uint64_t time_ns, uint64_t insns, const FrameId& frame);
  void EndLocked(ThreadState& state, uint64_t time_ns, uint64_t insns);
  // Rows keyed by (name, inlined, module basename), merged.
  using Rows = std::map<std::tuple<std::string, bool, std::string>, Totals>;
  using Row = std::pair<const Rows::key_type*, const Totals*>;
  void AddRows(ThreadState& state, Rows& rows);
  std::vector<Row> Sorted(const Rows& rows) const;  // the output's order, `top` rows
  std::string Table(const Rows& rows) const;
  std::string JsonRows(const Rows& rows, const std::string& indent) const;
  std::string Json(const Rows& all, const std::vector<Rows>& per_thread, uint64_t calls) const;

  std::mutex mutex_;
  std::unique_ptr<OutputFile> out_;
  FrameNameCache names_;
  size_t top_;
  Encoding encoding_;
  DecodeSummary totals_;  // from SetCaptureTotals (JSON only)
  std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<ThreadState>> threads_;
  ThreadState* last_state_ = nullptr;
  bool have_instructions_ = false;  // some record carried an instruction count
  bool finished_ = false;
  std::string error_;
};

}  // namespace ptscope::decode
