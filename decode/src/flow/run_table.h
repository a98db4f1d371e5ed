// WalkerRun and RunTable: the QueryWalker's decoded runs (see query_walker.h), by (section,
// address).
//
// The walker looks a run up for nearly every block, at an address the control flow picks, so the
// probe is mostly a cache miss (~5% of a pt-decode -j1 in perf, on a pt-synth capture with 15 K
// runs). FlatMap's slot for a run took 64 bytes (the key, a flag, the run with its section end
// and error code): 2 MB of table for those 15 K runs. A RunTable slot is the run itself, in 32
// bytes, two to a cache line: the key's address is kept as the run's length back from its end,
// an empty slot has isid 0 (the walker caches only section code, isid > 0), and there is no
// section end (the walker checks a run against the section it looked up) and no error code
// (whether the walker refuses the run is all it needs).
//
// Tried and left out: each run remembering, per way out, the slot it led to last (checked, then
// followed without the hash). 1.8% fewer instructions on bench-workload, but no faster: the
// look-up's time is the load of the slot, which the link's load only came before.
#pragma once

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ptscope::decode {

// From an address: the instructions up to and including the next branch (or up to the end of
// the section), decoded once.
struct WalkerRun {
  uint64_t end_ip = 0;  // the last instruction
  uint64_t target = 0;  // direct branch: its target
  int isid = 0;
  uint32_t length = 0;  // end_ip - the run's first address (< 2^16 instructions of <= 15 bytes)
  uint16_t ninsn = 0;
  uint8_t size = 0;  // the last instruction's length
  uint8_t iclass = ptic_error;
  bool direct = false;  // the last instruction is a direct call or jump
  // The run cannot be taken in one step: it ends at a section's end, or in code that cannot be
  // read or decoded. Next steps through it instead, as libipt. (A slow run with no instruction
  // has end_ip 0, and its first address in a RunTable.)
  bool slow = false;
  bool unsupported = false;  // (slow) in code the walker does not model: it refuses it
  // A call: its length as ClassifyBranch reads it (0: not known), which the FlowDecoder needs
  // for the return address. Carried here, the run's look-up answers it too: the FlowDecoder's
  // own table of call lengths was a second probe per block (see FlowDecoder::HandleBlock).
  uint8_t call_size = 0;
};
static_assert(sizeof(WalkerRun) == 32);

class RunTable {
 public:
  RunTable() { Rehash(kInitialSlots); }

  // The run at `ip` in section `isid` (> 0), or nullptr.
  [[gnu::always_inline]] const WalkerRun* Find(uint64_t ip, int isid) const {
    for (size_t i = Home(ip, isid);; i = (i + 1) & mask_) {
      const WalkerRun& slot = slots_[i];
      if (slot.isid == 0) return nullptr;
      if (slot.end_ip - slot.length == ip && slot.isid == isid) return &slot;
    }
  }
  // Adds `run`, decoded at `ip` in section `isid` (> 0), which the table does not hold yet. The
  // reference stays valid until the next Insert.
  const WalkerRun& Insert(uint64_t ip, int isid, WalkerRun run);
  size_t size() const { return size_; }

 private:
  static constexpr size_t kInitialSlots = 64;

  size_t Home(uint64_t ip, int isid) const {
    const uint64_t key = ip ^ (static_cast<uint64_t>(static_cast<uint32_t>(isid)) << 48);
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  WalkerRun& Place(const WalkerRun& run, uint64_t ip);  // into an empty slot
  void Rehash(size_t capacity);                        // capacity: a power of two

  std::vector<WalkerRun> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace ptscope::decode
