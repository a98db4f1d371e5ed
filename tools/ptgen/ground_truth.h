// The ground truth of a generated capture: one "TID 0xADDRESS" line per executed instruction, in
// execution order, written by pt-emulate (--ground-truth, single-stepped) and pt-synth (the walk
// it encoded), and read by the tests that compare a decode with it. One writer for both, so both
// files are byte-compatible and equally safe to write:
//  - created like every ptscope output (format/output_file.h): a symbolic link at the path is
//    refused, a new file is mode 0600 (it holds a program's addresses);
//  - append-only and line-based: every complete prefix is a valid ground truth, so Flush() makes
//    what was executed so far survive a killed writer;
//  - formatted without printf (one line per instruction on the generators' hot paths).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ptscope/output_file.h"
#include "ptscope/result.h"

namespace ptscope::ptgen {

class GroundTruthWriter {
 public:
  static Result<std::unique_ptr<GroundTruthWriter>> Create(const std::string& path);
  void Add(uint32_t tid, uint64_t ip);
  // Hands what is buffered to the kernel (a killed generator keeps it).
  Status Flush();
  // Flushes and closes; the first write error, if any, naming the file and the cause.
  Status Close();

 private:
  explicit GroundTruthWriter(format::OutputFile file) : file_(std::move(file)) {}
  format::OutputFile file_;
  std::vector<char> buffer_;
  Status status_;  // the first failed write (later writes are not tried)
};

}  // namespace ptscope::ptgen
