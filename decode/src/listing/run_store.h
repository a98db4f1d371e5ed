// RunStore: a per-CPU capture's instruction runs (one thread's stretch on one CPU), held until
// the listing writes them by thread and time, in memory of a bounded size whatever the length of
// the capture.
//
// Each run's addresses are encoded on their own: the first as a zigzag LEB128 varint of its
// difference from 0, each next one of its difference from the one before (most are a few bytes
// on: a byte or two an instruction instead of 8; 1.1 on a pt-synth per-CPU walk). The encoded bytes gather in a buffer of
// kBufferBytes, which goes to a scratch file (temp_file.h) when full; only the index of runs
// (tid, time, where its bytes are, how many addresses) stays in memory. A file that cannot be
// created or written is no error: the bytes stay in memory. Bytes read back are not trusted (the
// file may be cut or changed under us): a run must decode to exactly its count of addresses in
// exactly its bytes, or Replay fails with an error that names the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::decode {

class RunStore {
 public:
  static constexpr size_t kBufferBytes = size_t{1} << 20;

  RunStore() = default;
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  void Add(uint32_t tid, uint64_t time_ns, std::span<const uint64_t> addresses);
  // Hands every run to `write(tid, addresses)` ordered by thread, then time (equal times: in the
  // order added), in pieces of at most a run.
  template <typename Write>
  Status Replay(const Write& write) {
    Sort();
    for (const RunRef& run : runs_) {
      PTSCOPE_TRY(Load(run));
      write(run.tid, std::span<const uint64_t>(addresses_));
    }
    return Ok();
  }
  size_t file_bytes() const { return flushed_; }  // how many bytes went to the file

 private:
  struct RunRef {
    uint32_t tid = 0;
    uint64_t time_ns = 0;
    uint64_t offset = 0;  // of its first byte, counting the file's and then buffer_'s
    uint64_t bytes = 0;
    uint64_t count = 0;
  };
  void Sort();
  void Flush();  // buffer_ to the file, when it can
  Status Load(const RunRef& run);  // its addresses into addresses_

  std::vector<RunRef> runs_;
  std::vector<uint8_t> buffer_;  // the bytes past flushed_
  uint64_t flushed_ = 0;         // the bytes in the file
  int fd_ = -1;
  bool file_unusable_ = false;
  std::string dir_;  // the file's directory, for messages
  std::vector<uint8_t> read_;  // a run's bytes read back
  std::vector<uint64_t> addresses_;  // a run decoded
};

}  // namespace ptscope::decode
