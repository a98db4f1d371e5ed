// RunStore: a per-CPU capture's instruction runs (one thread's stretch on one CPU), held until
// the listing writes them by thread and time, in memory of a bounded size whatever the length of
// the capture.
//
// Each run's addresses are encoded on their own: the first as a zigzag LEB128 varint of its
// difference from 0, each next one of its difference from the one before (most are a few bytes
// on: a byte or two an instruction instead of 8; 1.1 on a pt-synth per-CPU walk). The encoded
// bytes gather in a buffer of kBufferBytes, which goes to a scratch file (temp_file.h) when full.
// The index of runs (tid, time, where its bytes are, how many addresses; 40 bytes a run, one a
// context switch) is bounded too: every `index_runs` runs are sorted by thread and time and go
// to a second scratch file as a sorted chunk, and Replay merges the chunks (and the runs still in
// memory) reading kMergeRecords of each at a time — an external merge sort, so a capture of
// millions of switches needs a few MB, not 40 bytes for each.
//
// A file that cannot be created or written is no error: what would have gone there stays in
// memory. Bytes read back are not trusted (a file may be cut or changed under us): an index
// record must point inside the bytes written, at no more than the longest run added, and come in
// its chunk's order; a run must decode to exactly its count of addresses in exactly its bytes.
// Otherwise Replay fails with an error that names the file's directory.
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
  static constexpr size_t kIndexRuns = 65536;  // 2.6 MB of index in memory at most
  static constexpr size_t kMergeRecords = 128;  // read at a time from each chunk in Replay

  explicit RunStore(size_t index_runs = kIndexRuns) : index_runs_(index_runs) {}
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  void Add(uint32_t tid, uint64_t time_ns, std::span<const uint64_t> addresses);
  // Hands every run to `write(tid, addresses)` ordered by thread, then time (equal times: in the
  // order added), in pieces of at most a run.
  template <typename Write>
  Status Replay(const Write& write) {
    PTSCOPE_TRY(StartMerge());
    for (;;) {
      PTSCOPE_ASSIGN_OR_RETURN(const RunRef* run, NextRun());
      if (run == nullptr) return Ok();
      PTSCOPE_TRY(Load(*run));
      write(run->tid, std::span<const uint64_t>(addresses_));
    }
  }
  size_t file_bytes() const { return flushed_; }  // how many bytes went to the file
  // How many runs' index records went to the index file.
  uint64_t index_file_runs() const { return index_file_runs_; }

 private:
  struct RunRef {  // as written to the index file: no padding (every byte is written)
    uint64_t time_ns = 0;
    uint64_t offset = 0;  // of its first byte, counting the file's and then buffer_'s
    uint64_t bytes = 0;
    uint64_t count = 0;
    uint32_t tid = 0;
    uint32_t zero = 0;
  };
  static_assert(sizeof(RunRef) == 40, "index records are written whole: no padding");
  struct Chunk {  // index_runs_ sorted records in the index file
    uint64_t first = 0;  // record number
    uint64_t count = 0;
  };
  struct Cursor {  // a chunk's place in the merge; the last one reads runs_
    bool in_file = true;
    uint64_t unread = 0, end = 0;  // records not yet read (a chunk) or taken (runs_)
    std::vector<RunRef> read;      // records read ahead from the index file
    size_t at = 0;
    RunRef head;  // its smallest run not yet replayed
    bool started = false;
  };
  void Sort();
  void Flush();       // buffer_ to the file, when it can
  void SpillIndex();  // runs_ as a sorted chunk to the index file, when it can
  Status StartMerge();
  // The heap's order (a max-heap of "after"): by the cursors' next run's thread, time, and then
  // cursor, so that equal times come in the order added (a chunk's runs were all added before
  // the next chunk's, runs_'s last, and each chunk was sorted stably).
  bool HeadAfter(size_t a, size_t b) const;
  Result<bool> Advance(size_t cursor);   // false: the cursor has no more runs
  Result<const RunRef*> NextRun();       // null after the last
  Status Load(const RunRef& run);  // its addresses into addresses_
  // The errors that name the files' directory: bytes that do not say what was written, and a
  // read that failed (errno; `where` leads the offset: "offset ", "index offset ").
  Error Changed(const std::string& what) const;
  Error Unreadable(const char* where, uint64_t offset) const;

  size_t index_runs_;
  std::vector<RunRef> runs_;     // runs not in the index file
  std::vector<uint8_t> buffer_;  // the bytes past flushed_
  uint64_t flushed_ = 0;         // the bytes in the file
  uint64_t longest_run_bytes_ = 0;
  int fd_ = -1;
  bool file_unusable_ = false;
  int index_fd_ = -1;
  bool index_unusable_ = false;
  uint64_t index_file_runs_ = 0;
  std::vector<Chunk> chunks_;
  std::vector<Cursor> cursors_;
  std::vector<size_t> heap_;  // cursors with runs left, the smallest head first
  RunRef current_;
  std::string dir_;  // the files' directory, for messages
  std::vector<uint8_t> read_;  // a run's bytes read back
  std::vector<uint64_t> addresses_;  // a run decoded
};

}  // namespace ptscope::decode
