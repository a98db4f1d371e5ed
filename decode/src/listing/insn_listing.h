// `--format insns`: every retired instruction as "TID 0xADDRESS", in program order per thread,
// from the same decode as the trace (the FlowDecoder's blocks, QueryWalker by default: see
// FlowDecoder::ListInstructions). Per-thread streams are written as their units come; a per-CPU
// stream's runs (one thread's stretch on one CPU) are kept, compactly and past a buffer in a
// scratch file (listing/run_store.h: memory does not grow with the capture), and written after
// them by thread and time. (libipt's own instruction decoder lists the same as the tests' oracle:
// tests/support/oracle/ipt_insns.cpp.)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "capture/streams.h"
#include "flow/unit_events.h"
#include "listing/run_store.h"
#include "ptscope/decode.h"
#include "sink/output_file.h"
#include "work_unit.h"

namespace ptscope::decode {

// Writer of "TID 0xADDRESS\n" lines straight into the output's buffer (no printf on the hot
// path).
class InsnWriter {
 public:
  explicit InsnWriter(OutputFile* out) : out_(out) {}
  void Write(uint32_t tid, uint64_t address);

 private:
  OutputFile* out_;
};

class InsnListing {
 public:
  // Opens `path` ("-": stdout; ".gz": compressed) as every output is opened (OutputFile: a
  // temporary file renamed over the path when complete, never through a symbolic link).
  static Result<std::unique_ptr<InsnListing>> Open(const std::string& path,
                                                   const std::vector<Stream>& streams,
                                                   const std::vector<uint32_t>& selected);

  // The next decoded unit in plan order.
  void Consume(const WorkUnit& work, const UnitEvents& events);
  // Writes the per-CPU runs and closes the file; adds the counts to `summary`.
  Status Finish(DecodeSummary& summary);

 private:
  InsnListing(std::unique_ptr<OutputFile> out, const std::vector<Stream>& streams,
              const std::vector<uint32_t>& selected);
  std::unique_ptr<OutputFile> out_;  // (not closed: removed, never put at the path)
  const std::vector<Stream>& streams_;
  const std::vector<uint32_t>& selected_;
  InsnWriter writer_;
  RunStore runs_;  // per-CPU
  uint64_t instructions_ = 0;
  DecodeStats counts_;
  std::vector<std::string> first_errors_;  // per stream
  std::vector<bool> stream_listed_;        // per stream: a per-thread stream's units came
};

}  // namespace ptscope::decode
