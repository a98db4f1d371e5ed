// `--format insns`: every retired instruction as "TID 0xADDRESS", in program order per thread,
// from the same decode as the trace (the FlowDecoder's blocks, QueryWalker by default: see
// FlowDecoder::ListInstructions). Per-thread streams are written as their units come; a per-CPU
// stream's runs (one thread's stretch on one CPU) are kept, and written after them by thread and
// time. (libipt's own instruction decoder lists the same as the tests' oracle:
// tests/support/oracle/ipt_insns.cpp.)
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "capture/streams.h"
#include "flow/unit_events.h"
#include "ptscope/decode.h"
#include "work_unit.h"

namespace ptscope::decode {

// Buffered writer of "TID 0xADDRESS\n" lines (no printf on the hot path).
class InsnWriter {
 public:
  explicit InsnWriter(std::FILE* out) : out_(out) {}
  ~InsnWriter() { Flush(); }
  void Write(uint32_t tid, uint64_t address);
  void Flush();
  bool failed() const { return failed_; }

 private:
  std::FILE* out_;
  char buffer_[1 << 16];
  size_t used_ = 0;
  bool failed_ = false;
};

class InsnListing {
 public:
  // Opens `path` ("-": stdout).
  static Result<std::unique_ptr<InsnListing>> Open(const std::string& path,
                                                   const std::vector<Stream>& streams,
                                                   const std::vector<uint32_t>& selected);
  ~InsnListing();

  // The next decoded unit in plan order.
  void Consume(const WorkUnit& work, const UnitEvents& events);
  // Writes the per-CPU runs and closes the file; adds the counts to `summary`.
  Status Finish(DecodeSummary& summary);

 private:
  InsnListing(std::FILE* file, bool to_stdout, const std::string& path,
              const std::vector<Stream>& streams, const std::vector<uint32_t>& selected);
  struct Run {
    uint32_t tid = 0;
    uint64_t time_ns = 0;
    std::vector<uint64_t> insns;
  };

  std::FILE* file_;
  bool to_stdout_;
  std::string path_;
  const std::vector<Stream>& streams_;
  const std::vector<uint32_t>& selected_;
  InsnWriter writer_;
  std::vector<Run> runs_;  // per-CPU
  uint64_t instructions_ = 0;
  DecodeStats counts_;
  std::vector<std::string> first_errors_;  // per stream
};

}  // namespace ptscope::decode
