// RecordSpill: held-back slice records kept in an unlinked temporary file instead of memory.
//
// A StackTracker holds a thread's slice records back until an inferred caller can no longer wrap
// them (stack_tracker.h "Buffering"), up to max_buffered_events records (2^20, 40 MB): a thread
// whose bottom frame never returns (a worker's loop, main) reaches that bound, and so did every
// thread of a per-CPU capture sharing it. With a RecordSpill the tracker keeps at most
// StackTrackerOptions::resident_records of them in memory and moves each full resident block
// here; at its next flush it reads the blocks back in order. The records written and their order
// are the same: only where they wait changes, so peak memory no longer depends on how long a
// frame stays open, and output stays byte for byte what it was.
//
// One file for all trackers of a decode (created at the first spill, in $TMPDIR or /tmp, and
// unlinked at once: nothing is left behind, even after a crash). Blocks have one size, so a
// freed block's slot is reused: the file holds at most the records held back at one time.
// A file that cannot be created or written is no error: the trackers keep their records in
// memory, as without a RecordSpill. A block that cannot be read back is (the output would lack
// its records): error() says so, and the pipeline fails the decode, as for an output write error.
// Thread-safe (a mutex): trackers on several threads may share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "events.h"

namespace ptscope::decode {

class RecordSpill {
 public:
  // `block_records`: the records of every block (StackTrackerOptions::resident_records).
  explicit RecordSpill(size_t block_records);
  ~RecordSpill();
  RecordSpill(const RecordSpill&) = delete;
  RecordSpill& operator=(const RecordSpill&) = delete;

  size_t block_records() const { return block_records_; }
  // Stores block_records() records; returns the block's slot, or -1 when the file cannot be
  // created or written (the caller keeps the records: spilling stops for everyone).
  int64_t Store(const SliceRecord* records);
  // Reads records [first, first + count) of block `slot` into `out`. False when the read fails
  // (error() then says why).
  bool Load(int64_t slot, size_t first, size_t count, SliceRecord* out);
  // Frees a block's slot (read or not).
  void Release(int64_t slot);

  // Blocks written and read back, and the most in the file at once (for tests and benches).
  uint64_t blocks_stored() const;
  size_t peak_blocks() const;
  // Empty unless a block could not be read back.
  std::string error() const;

 private:
  bool Open();  // with mutex_ held

  const size_t block_records_;
  mutable std::mutex mutex_;
  int fd_ = -1;
  bool unusable_ = false;  // creating or writing failed: no more spilling
  std::string path_;       // the directory, for messages
  std::vector<int64_t> free_slots_;
  int64_t slots_ = 0;      // slots in the file
  size_t in_use_ = 0, peak_in_use_ = 0;
  uint64_t stored_ = 0;
  std::string error_;
};

}  // namespace ptscope::decode
