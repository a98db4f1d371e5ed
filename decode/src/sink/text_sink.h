// TextSink: an indented call tree per thread, for people and golden tests.
//
//   thread 7/8 "prog" "worker"
//     [0 +50] main (inferred)
//       [10 +30] a  a.c:12
//       [40] ! [gap] overflow
//
// One line per slice "[start_ns +duration_ns] name", children indented by two spaces, flags
// "(inferred)" / "(inlined)", then "  file:line" when known; instants "[time_ns] ! text".
// Threads are written at Finish in (pid, tid) order, so the output is deterministic whatever
// order threads were decoded in. Holds the whole tree in memory: meant for small traces.
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

namespace ptscope::decode {

class TextSink : public SliceSink {
 public:
  TextSink(std::unique_ptr<OutputFile> out, FrameNamer& namer);

  void BeginThread(const ThreadKey& thread, const std::string& process_name,
                   const std::string& thread_name) override;
  void Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
             bool inferred) override;
  void End(const ThreadKey& thread, uint64_t time_ns) override;
  void Instant(const ThreadKey& thread, uint64_t time_ns, const std::string& text) override;
  void Finish() override;
  std::string OutputError() const override { return error_; }

 private:
  struct Line {
    uint32_t depth;
    uint64_t start;
    uint64_t end;
    bool closed;
    bool is_instant;
    std::string text;  // name with flags and location, or the instant's text
  };
  struct ThreadLog {
    std::string process_name, thread_name;
    std::vector<Line> lines;
    std::vector<size_t> open;  // indices into lines
    uint64_t last_time = 0;
  };
  ThreadLog& LogFor(const ThreadKey& thread);

  std::mutex mutex_;
  std::unique_ptr<OutputFile> out_;
  FrameNameCache names_;
  std::map<std::pair<uint32_t, uint32_t>, ThreadLog> threads_;
  bool finished_ = false;
  std::string error_;
};

}  // namespace ptscope::decode
