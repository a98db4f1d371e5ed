// RecordSpill: where held-back slice records wait: as they are, then compactly encoded, in
// memory up to two byte budgets, and past them in an unlinked temporary file.
//
// A StackTracker holds a thread's slice records back until an inferred caller can no longer wrap
// them (stack_tracker.h "Buffering"), up to max_buffered_events records (2^20, 32 MB as
// SliceRecords): a thread whose bottom frame never returns (a worker's loop, main) reaches that
// bound, and so does every thread of a per-CPU capture. With a RecordSpill the tracker keeps at
// most block_records() of them in its buffer and hands each full block here, which keeps it
//   1. as it is (the tracker's vector itself, swapped for an empty one of a released block: no
//      copy, no encoding) while such blocks fit in the raw budget; else
//   2. encoded (below: 3 to 4 bytes a record instead of 32; 3.4 on synth-100M) in memory while
//      the encoded blocks fit in the encoded budget; else
//   3. encoded in the file.
// The cheapest place comes first: encoding a record and decoding it again costs about 110
// instructions (callgrind, synth-10M: +3.8% of the decode), the file's write and read-back
// kernel time and page cache (about 45 ms of sys time and 108 MB on synth-100M when every block
// went there). At its next flush the tracker reads its blocks back in order (Reader). The
// records and their order are exactly those stored: only where they wait changes, so peak
// memory no longer depends on how long a frame stays open, and the output stays byte for byte
// what it was.
//
// Encoding (private to this process, never on disk past its end: no format to keep stable). Per
// record, relative to the previous record of the block (the first: to an all-zero record), and
// to the frame of the last record before it that has one (not a kInstant: its frame.address is
// its text, SliceRecord::text()):
//   tag byte: bits 0-1 type, bit 2 inferred, bits 3-5 frame kind or 7 = that last frame (kind,
//             address and inline index; always 7 for a kInstant), bit 6 = the previous record's
//             time and instruction count, bit 7 = a flags byte follows (kExtra*; never for a
//             kInstant)
//   [flags]   kExtraInlineIndex: an inline_index varint follows
//   unless bit 6: time_ns - previous, then instructions - previous, as LEB128 varints modulo 2^64
//             (both never decrease inside a tracker, so they are small; a decrease still comes
//             back exactly, in 10 bytes)
//   unless frame kind 7: address - that last address, zigzag LEB128 varint (modulo 2^64)
//   [inline_index varint]; for kInstant the text's index, a varint: 0 for none, else 1 + its
//             place in the block's text table, where Encode copies each text (the block owns
//             its texts: no pointer is ever read from the bytes).
// The bytes are not trusted when read back (a file can be cut short or changed under us): Decode
// checks every read against the block's length, the type, flags and text indexes, and a block
// that does not decode to exactly its records in exactly its bytes is one that cannot be read
// back (error()), never a crash or a wrong record.
// At most kMaxRecordBytes a record, so a block's bytes are bounded before it is encoded.
//
// One file for all trackers of a decode (created at the first block past the budgets, in $TMPDIR
// or /tmp, and unlinked at once: nothing is left behind, even after a crash). Each block has a
// slot of block_records() * kMaxRecordBytes bytes in it, of which it writes only its encoded
// length (the rest stays a hole); a freed slot is reused, so the file spans at most the blocks
// held there at one time. A file that cannot be created or written is no error: its blocks stay
// in memory, encoded, past the budget, as if there were no file. A block that cannot be read
// back is (the output would lack its records): error() says so, and the pipeline fails the
// decode, as for an output write error.
// Thread-safe (a mutex): trackers on several threads may share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "events.h"

namespace ptscope::decode {

class RecordSpill {
 public:
  // The most bytes one record takes encoded: tag, flags, 3 varints of 10 bytes, a 5-byte
  // inline_index and a text index of up to 10 bytes.
  static constexpr size_t kMaxRecordBytes = 1 + 1 + 3 * 10 + 5 + 10;

  // `block_records`: the records of every block. `raw_bytes`: blocks kept as they are (as
  // SliceRecords, handed over without a copy), all trackers together; `encoded_bytes`: the
  // encoded bytes of the blocks kept in memory past those; past both, the file.
  RecordSpill(size_t block_records, size_t raw_bytes, size_t encoded_bytes);
  ~RecordSpill();
  RecordSpill(const RecordSpill&) = delete;
  RecordSpill& operator=(const RecordSpill&) = delete;

  size_t block_records() const { return block_records_; }
  // Keeps the first `count` records of `buffer` as one block and returns its handle. While the
  // raw budget allows and `buffer` is exactly one block, `buffer` itself is kept and replaced by
  // another vector of the same size (one that a released block left, or a new one); else the
  // records are encoded and `buffer` is left as it was. Never fails: what the file cannot take
  // stays in memory.
  int64_t Store(std::vector<SliceRecord>& buffer, size_t count);
  // Frees a block (read or not).
  void Release(int64_t block);

  // Reads one block's records back, in runs (one per tracker, reused from block to block).
  class Reader {
   public:
    // False when the block is in the file and cannot be read (error() then says why); the
    // block is still the caller's to Release.
    bool Open(RecordSpill& spill, int64_t block);
    // The next run of at most `max` records of the open block: *run points into the block when
    // it was kept as it is, else to `scratch`, where they are decoded. Returns how many (0: none
    // left, or the block's bytes do not decode: error() then says so and no more of it comes).
    // A run stays valid until the next Read, the texts it points to until the block's Release.
    size_t Read(const SliceRecord** run, SliceRecord* scratch, size_t max);

   private:
    RecordSpill* spill_ = nullptr;
    std::vector<uint8_t> file_bytes_;  // a block read back from the file
    const SliceRecord* raw_ = nullptr;  // a block kept as it is
    const uint8_t* next_ = nullptr;     // else its encoded bytes, up to end_
    const uint8_t* end_ = nullptr;
    const std::string* texts_ = nullptr;  // the block's text table (its heap array: never moves)
    size_t text_count_ = 0;
    bool in_file_ = false;  // for the message
    size_t bytes_ = 0;      // the block's encoded bytes (for the message)
    size_t left_ = 0;    // records not yet read
    size_t read_ = 0;    // records read
    SliceRecord prev_;   // the last record's clock, the last frame (Decode's `prev`)
  };

  // Blocks stored, those kept as they were, those written to the file, the most held at once,
  // and the encoded bytes of all blocks encoded (for tests and benches).
  uint64_t blocks_stored() const;
  uint64_t blocks_raw() const;
  uint64_t blocks_in_file() const;
  size_t peak_blocks() const;
  uint64_t bytes_stored() const;
  // Empty unless a block could not be read back.
  std::string error() const;

  // The encoding alone (also for tests): writes the records' bytes to `out` (room for
  // count * kMaxRecordBytes), appends their texts to `texts` (the bytes hold indexes into it) and
  // returns how many bytes. Decode reads `count` records from [data, end) after *prev (the clock
  // of the record before them and the frame of the last one with a frame; an all-zero
  // SliceRecord before a block's first), their texts pointing into `texts`, leaving those of the
  // last in *prev; it returns the position after them, or null when the bytes run past `end` or
  // are not such records (a bad type, flags or text index).
  static size_t Encode(const SliceRecord* records, size_t count, uint8_t* out,
                       std::vector<std::string>* texts);
  static const uint8_t* Decode(const uint8_t* data, const uint8_t* end, size_t count,
                               SliceRecord* prev, SliceRecord* out, const std::string* texts,
                               size_t text_count);

 private:
  struct Block {
    std::vector<SliceRecord> raw;      // kept as it was, else empty
    std::unique_ptr<uint8_t[]> bytes;  // encoded in memory, else null
    size_t size = 0;                   // encoded bytes
    size_t records = 0;
    int64_t slot = -1;                 // in the file
    std::vector<std::string> texts;    // an encoded block's texts, by index
  };
  bool OpenFile();  // with mutex_ held
  // Records the first read-back failure (error()); `in_file`: from the file, else from memory.
  void Fail(bool in_file, const std::string& why);
  size_t SlotBytes() const { return block_records_ * kMaxRecordBytes; }

  const size_t block_records_;
  const size_t raw_bytes_, encoded_bytes_;
  mutable std::mutex mutex_;
  std::unique_ptr<uint8_t[]> scratch_;  // a block being encoded (its pages touched as written)
  std::vector<Block> blocks_;  // by handle
  // Vectors of a block that released raw blocks left, for the next Store to hand out; with
  // those in blocks_, raw_allocated_ of them exist beside the trackers' own.
  std::vector<std::vector<SliceRecord>> raw_pool_;
  size_t raw_allocated_ = 0;
  std::vector<int64_t> free_blocks_, free_slots_;
  int fd_ = -1;
  bool unusable_ = false;  // creating or writing failed: no more blocks to the file
  std::string path_;       // the directory, for messages
  int64_t slots_ = 0;      // slots in the file
  size_t in_memory_ = 0;   // encoded bytes of the blocks in memory
  size_t in_use_ = 0, peak_in_use_ = 0;
  uint64_t stored_ = 0, raw_ = 0, in_file_ = 0, bytes_ = 0;
  std::string error_;
};

}  // namespace ptscope::decode
