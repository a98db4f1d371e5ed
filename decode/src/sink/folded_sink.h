// FoldedSink: "a;b;c N" lines for flame graphs (flamegraph.pl, speedscope, inferno), N = self time
// in nanoseconds of the stack a;b;c. Stacks are merged across threads and processes (no thread
// prefix); lines are sorted, zero-weight stacks omitted. Instants are not part of the output.
// Memory grows with the number of distinct stacks, not with the trace length.
#pragma once

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

class FoldedSink : public SliceSink {
 public:
  FoldedSink(std::unique_ptr<OutputFile> out, FrameNamer& namer);

  void BeginThread(const ThreadKey&, const std::string&, const std::string&) override {}
  void Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
             bool inferred) override;
  void End(const ThreadKey& thread, uint64_t time_ns) override;
  // Not part of the output; only moves the thread's last time (where Finish closes leftovers).
  void Instant(const ThreadKey& thread, uint64_t time_ns, const std::string&) override;
  void WriteRecords(const ThreadKey& thread, const SliceRecord* records, size_t count) override;
  void Finish() override;
  std::string OutputError() const override { return error_; }

 private:
  // A trie of stacks; children are keyed by the name's address in the name cache (stable).
  struct Node {
    const std::string* name = nullptr;
    uint32_t parent = 0;
    uint64_t self_ns = 0;
    std::map<const std::string*, uint32_t> children;
  };
  struct OpenSlice {
    uint32_t node;
    uint64_t start;
    uint64_t child_ns;
  };
  struct ThreadStack {
    std::vector<OpenSlice> open;
    uint64_t last_time = 0;
  };
  void BeginLocked(const ThreadKey& thread, ThreadStack& stack, uint64_t time_ns,
                   const FrameId& frame);
  void EndLocked(ThreadStack& stack, uint64_t time_ns);
  std::string PathOf(uint32_t node) const;

  std::mutex mutex_;
  std::unique_ptr<OutputFile> out_;
  FrameNameCache names_;
  std::vector<Node> nodes_;  // nodes_[0] is the root
  // (parent node, pid, frame) -> child node: the per-slice path skips naming and the std::map.
  struct ChildKey {
    uint32_t parent = 0, pid = 0;
    FrameId frame;
    bool operator==(const ChildKey&) const = default;
  };
  struct ChildKeyHash {
    uint64_t operator()(const ChildKey& k) const {
      return (k.frame.address ^ (uint64_t{k.parent} << 32) ^ (uint64_t{k.pid} << 13) ^
              (uint64_t{k.frame.inline_index} << 52) ^ (uint64_t(k.frame.kind) << 60)) *
             0x9e3779b97f4a7c15ull;
    }
  };
  FlatMap<ChildKey, uint32_t, ChildKeyHash> child_of_;  // node index + 1
  std::map<std::pair<uint32_t, uint32_t>, ThreadStack> threads_;
  bool finished_ = false;
  std::string error_;
};

}  // namespace ptscope::decode
