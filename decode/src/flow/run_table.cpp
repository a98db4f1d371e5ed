// RunTable (see run_table.h).
#include "flow/run_table.h"

namespace ptscope::decode {

const WalkerRun& RunTable::Insert(uint64_t ip, int isid, WalkerRun run) {
  run.isid = isid;
  if (run.ninsn == 0) run.end_ip = ip;  // (slow: nothing decoded there)
  run.length = static_cast<uint32_t>(run.end_ip - ip);
  // Load factor under 1/2: at up to 3/4, bench-workload's 1,483 runs filled 2,048 slots, and its
  // hot runs sat at the end of probe chains of up to 43 slots (callgrind: a pt-decode -j1 ran
  // 5.1% more instructions).
  if ((size_ + 1) * 2 > slots_.size()) Rehash(slots_.size() * 2);
  ++size_;
  return Place(run, ip);
}

WalkerRun& RunTable::Place(const WalkerRun& run, uint64_t ip) {
  size_t i = Home(ip, run.isid);
  while (slots_[i].isid != 0) i = (i + 1) & mask_;
  return slots_[i] = run;
}

void RunTable::Rehash(size_t capacity) {
  std::vector<WalkerRun> old = std::move(slots_);
  slots_.assign(capacity, WalkerRun{});
  mask_ = capacity - 1;
  shift_ = 64;
  for (size_t c = capacity; c > 1; c >>= 1) --shift_;
  for (const WalkerRun& run : old) {
    if (run.isid != 0) Place(run, run.end_ip - run.length);
  }
}

}  // namespace ptscope::decode
