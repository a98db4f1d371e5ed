#include "walker.h"

#include <cerrno>
#include <cstring>

namespace ptscope::synth {
namespace {

// Where a return with an empty shadow stack goes: untraced code (a libc-like address).
constexpr uint64_t kUntracedReturn = 0x7ffff7c29d90;
// Where a jump into a shared library goes (untraced; a libc-like address).
constexpr uint64_t kUntracedLibrary = 0x7ffff7c80e50;
constexpr size_t kMaxShadowDepth = 1u << 14;
constexpr size_t kSteerDepth = 24;
constexpr size_t kMaxWalkDepth = 200;  // deeper than this, the walk restarts at its next packet
constexpr uint32_t kHotVisits = 64;  // visits in one segment after which a block is "hot"
// Visits in one segment after which a block is a trap (see ChooseTaken): no walk that leaves
// its loops gets here, so walks that end are the same with or without this rule.
constexpr uint32_t kStuckVisits = 4096;
// A walk restarts at a random function after 20k..100k instructions (see Step).
constexpr uint64_t kSegmentMin = 20000, kSegmentSpread = 80000;
constexpr uint32_t kMaxSegmentSyscalls = 64;  // more in one segment: a syscall loop  // beyond this call depth the walk prefers to return

class Rng {  // xorshift64*: fast, and deterministic for a seed
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {
    if (state_ == 0) state_ = 1;
  }
  uint64_t Next() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545f4914f6cdd1dull;
  }
  uint64_t Below(uint64_t n) { return (Next() >> 32) * n >> 32; }

 private:
  uint64_t state_;
};

struct Frame {
  uint64_t return_ip;
  int32_t block;  // kNoBlock when the return address is not viable code
};

class Walker {
 public:
  Walker(CodeGraph& graph, ptgen::PtPacketEncoder& encoder, const WalkOptions& options,
         GroundTruthWriter* truth)
      : graph_(graph), enc_(&encoder), options_(options), truth_(truth), rng_(options.seed) {}

  WalkStats Run() {
    tsc_ = options_.start_tsc;
    NewSegment();
    int32_t current = RandomEntry();
    if (options_.placement != nullptr) enc_ = options_.placement->Run(tsc_, &tsc_);
    enc_->Enable(graph_.block(current).start, tsc_);
    while (current >= 0) {
      enc_->MaybePsb(graph_.block(current).start, tsc_);
      current = Step(current);
    }
    enc_->Flush();
    stats_.end_tsc = tsc_;
    if (options_.placement != nullptr) options_.placement->Left(last_disable_, true);
    return stats_;
  }

 private:
  int32_t RandomEntry() {
    const auto& entries = graph_.entries();
    return entries[rng_.Below(entries.size())];
  }

  // Runs one block; returns the next block, or -1 when the walk is over.
  int32_t Step(int32_t index) {
    Block& visited = graph_.block(index);
    if (visited.visit_epoch != epoch_) {
      visited.visit_epoch = epoch_;
      visited.visits = 0;
    }
    ++visited.visits;
    current_ = index;
    const Block b = visited;  // a copy: resolving successors may grow the graph
    if (truth_ != nullptr) {
      const uint8_t* size = graph_.sizes(b);
      for (uint64_t ip = b.start, i = 0; i < b.instructions; ip += size[i], ++i) {
        truth_->Add(options_.tid, ip);
      }
    }
    const uint64_t at = tsc_ + b.instructions - 1;  // the terminator starts here
    tsc_ += b.instructions;
    stats_.instructions += b.instructions;
    ++stats_.blocks;
    const bool last = stats_.instructions >= options_.instructions;
    // A walk that ran long enough since its last restart, or went too deep, leaves at its next
    // packet, so that a loop it cannot get out of (a retry loop, a command loop) or a recursion
    // does not fill the capture.
    if ((stats_.instructions >= segment_end_ || stack_.size() > kMaxWalkDepth) && !last &&
        LeavesAtPacket(b.end)) {
      return Leave(kUntracedReturn, at, false);
    }
    switch (b.end) {
      case BlockEnd::kCondBranch: return CondBranch(index, b, at, last);
      case BlockEnd::kJump: return DirectTransfer(graph_.Target(index), b, at);
      case BlockEnd::kCall: return Call(index, b, at);
      case BlockEnd::kIndirectJump:
      case BlockEnd::kIndirectCall: return Indirect(b.end, b.fallthrough, at, last);
      case BlockEnd::kImportJump: return ImportJump(at, last);
      case BlockEnd::kReturn: return Return(b, at, last);
      case BlockEnd::kSyscall: return Syscall(index, at, last);
      case BlockEnd::kDead: break;
    }
    return -1;  // not reached: dead blocks are never entered
  }

  int32_t CondBranch(int32_t index, const Block& b, uint64_t at, bool last) {
    const int32_t taken = graph_.Target(index), not_taken = graph_.Fallthrough(index);
    const bool take = (taken >= 0 && not_taken >= 0) ? ChooseTaken(b, taken, not_taken)
                                                     : taken >= 0;
    const uint64_t next_ip = take ? b.target : b.fallthrough;
    // The walk never ends at a conditional branch: perf's decoder does not accept a TIP.PGD
    // bound to one ("Trace doesn't match instruction"), although libipt does.
    if (taken < 0 && not_taken < 0) return Leave(next_ip, at, last);
    enc_->CondBranch(take, at);
    return take ? taken : not_taken;
  }

  // Loops iterate: a backward branch is taken 7 times in 8, a forward one half of the time. A
  // block visited often in this segment prefers its less visited successor (the walk leaves
  // loops it is stuck in). Deep in the shadow stack the walk steers toward the cheaper way to a
  // return, or random code would call far more often than it returns.
  bool ChooseTaken(const Block& b, int32_t taken, int32_t not_taken) {
    const Block& t = graph_.block(taken);
    const Block& f = graph_.block(not_taken);
    // A loop whose only way out leads to code to avoid (a spin loop before a syscall retry
    // loop) must still be left, or the walk never ends: far past "hot", the visit counts win.
    if (graph_.block(current_).visits > kStuckVisits) {
      const uint32_t tv = t.visit_epoch == epoch_ ? t.visits : 0;
      const uint32_t fv = f.visit_epoch == epoch_ ? f.visits : 0;
      if (tv != fv) return tv < fv;
    }
    if (t.avoid != f.avoid) return f.avoid;
    if (stack_.size() >= kSteerDepth && t.return_cost != f.return_cost) {
      return t.return_cost < f.return_cost;
    }
    if (graph_.block(current_).visits > kHotVisits) {
      const uint32_t tv = t.visit_epoch == epoch_ ? t.visits : 0;
      const uint32_t fv = f.visit_epoch == epoch_ ? f.visits : 0;
      if (tv != fv) return tv < fv;
    }
    return b.target <= b.end_ip ? rng_.Below(8) != 0 : rng_.Below(2) != 0;
  }

  int32_t RandomCheapEntry() {
    int32_t best = RandomEntry();
    if (stack_.size() < kSteerDepth) return best;
    for (int i = 0; i < 3; ++i) {
      const int32_t other = RandomEntry();
      if (graph_.block(other).return_cost < graph_.block(best).return_cost) best = other;
    }
    return best;
  }

  // A direct jmp/call makes no packet, so the walk cannot end here; a dead target is left as
  // untraced code (TIP.PGD binds to the direct branch whose target it names).
  int32_t DirectTransfer(int32_t target, const Block& b, uint64_t at) {
    if (target < 0) return Leave(b.target, at, false);
    return target;
  }

  int32_t Call(int32_t index, const Block& b, uint64_t at) {
    const int32_t target = graph_.Target(index);
    if (target < 0) return Leave(b.target, at, false);
    Push(b.fallthrough, graph_.Fallthrough(index));
    enc_->Call(b.fallthrough, b.target == b.fallthrough);
    return target;
  }

  int32_t Indirect(BlockEnd end, uint64_t fallthrough, uint64_t at, bool last) {
    const int32_t target = RandomCheapEntry();
    const uint64_t target_ip = graph_.block(target).start;
    if (last) return Leave(target_ip, at, true);
    if (end == BlockEnd::kIndirectCall) {
      Push(fallthrough, kUnresolved);
      enc_->Call(fallthrough, false);
    }
    enc_->IndirectBranch(target_ip, at);
    return target;
  }

  int32_t Return(const Block&, uint64_t at, bool last) {
    ++stats_.returns;
    if (stack_.empty()) return Leave(kUntracedReturn, at, last);
    Frame frame = stack_.back();
    stack_.pop_back();
    if (frame.block == kUnresolved) frame.block = graph_.BlockAt(frame.return_ip);
    if (last || frame.block < 0) return Leave(frame.return_ip, at, last);
    enc_->Return(frame.return_ip, at);
    return frame.block;
  }

  // A jump into a shared library (a PLT stub): that code is not traced, and it returns to our
  // caller. TIP.PGD at the jump, then TIP.PGE at the return address. The decoder's return
  // compression stack keeps the caller's entry (it saw no return), and so does the encoder's.
  int32_t ImportJump(uint64_t at, bool last) {
    if (last || stack_.empty()) return Leave(kUntracedLibrary, at, last);
    // Now and then the library calls back into the binary (qsort's comparator, a callback):
    // the stub's TIP lands on a function entry, like any indirect jump.
    if (stack_.size() < kSteerDepth && rng_.Below(4) == 0) return Indirect(BlockEnd::kIndirectJump, 0, at, false);
    Frame frame = stack_.back();
    stack_.pop_back();
    if (frame.block == kUnresolved) frame.block = graph_.BlockAt(frame.return_ip);
    if (frame.block < 0) return Leave(kUntracedLibrary, at, false);
    ++stats_.library_calls;
    Disable(kUntracedLibrary, /*suppress_ip=*/false, at);
    Untraced(at);
    enc_->Enable(frame.return_ip, tsc_);
    return frame.block;
  }

  int32_t Syscall(int32_t index, uint64_t at, bool last) {
    ++stats_.syscalls;
    Disable(0, /*suppress_ip=*/true, at);
    if (last) return -1;
    Untraced(at);
    int32_t next = graph_.Fallthrough(index);
    // A walk caught in a syscall loop (a retry loop whose exits are dead code) goes elsewhere,
    // and walks keep out of that block from now on.
    if (++segment_syscalls_ > kMaxSegmentSyscalls) {
      graph_.block(index).avoid = true;
      NewSegment();
      next = kNoBlock;
    }
    if (next < 0) {
      next = RandomEntry();
      stack_.clear();
    }
    enc_->Enable(graph_.block(next).start, tsc_);
    return next;
  }

  static bool LeavesAtPacket(BlockEnd end) {
    return end == BlockEnd::kReturn ||
           end == BlockEnd::kIndirectJump || end == BlockEnd::kImportJump ||
           end == BlockEnd::kIndirectCall;
  }

  void NewSegment() {
    segment_end_ = stats_.instructions + kSegmentMin + rng_.Below(kSegmentSpread);
    segment_syscalls_ = 0;
    ++epoch_;
  }

  // The branch at `at` goes to untraced code at `target_ip`: TIP.PGD. Unless the walk is over,
  // tracing resumes later at a random function entry.
  int32_t Leave(uint64_t target_ip, uint64_t at, bool last) {
    Disable(target_ip, /*suppress_ip=*/false, at);
    if (last) return -1;
    ++stats_.restarts;
    NewSegment();
    stack_.clear();
    Untraced(at);
    const int32_t next = RandomEntry();
    enc_->Enable(graph_.block(next).start, tsc_);
    return next;
  }

  // The time between a TIP.PGD at `at` and the TIP.PGE that resumes the walk. Per CPU, the
  // thread may leave its CPU meanwhile (in the kernel, in untraced code) and resume on another.
  void Untraced(uint64_t at) {
    tsc_ += options_.untraced_ticks;
    if (options_.placement == nullptr) return;
    options_.placement->Left(at, false);
    enc_ = options_.placement->Run(tsc_, &tsc_);
  }

  void Disable(uint64_t target_ip, bool suppress_ip, uint64_t at) {
    enc_->Disable(target_ip, suppress_ip, at);
    last_disable_ = at;
    if (options_.exits != nullptr) {
      options_.exits->push_back({options_.tid, stats_.instructions, suppress_ip ? 0 : target_ip});
    }
  }

  void Push(uint64_t return_ip, int32_t block) {
    ++stats_.calls;
    if (stack_.size() >= kMaxShadowDepth) {  // forget the oldest half: those returns go untraced
      stack_.erase(stack_.begin(), stack_.begin() + kMaxShadowDepth / 2);
    }
    stack_.push_back({return_ip, block});
    if (stack_.size() > stats_.max_depth) stats_.max_depth = stack_.size();
  }

  CodeGraph& graph_;
  ptgen::PtPacketEncoder* enc_;  // (per-CPU: the current CPU's)
  const WalkOptions& options_;
  GroundTruthWriter* truth_;
  Rng rng_;
  uint64_t tsc_ = 0;
  uint64_t last_disable_ = 0;  // the time of the last TIP.PGD
  uint64_t segment_end_ = 0;
  uint32_t epoch_ = 0;
  uint32_t segment_syscalls_ = 0;        // segment number, for Block::visits
  int32_t current_ = 0;       // the block Step runs  // instruction count at which the walk restarts elsewhere
  std::vector<Frame> stack_;
  WalkStats stats_;
};

}  // namespace

Result<WalkStats> Walk(CodeGraph& graph, ptgen::PtPacketEncoder& encoder,
                       const WalkOptions& options, GroundTruthWriter* truth) {
  if (graph.entries().empty()) {
    return Unexpected(Errc::kInvalidArgument,
                      "the binary has no decodable function entry to start a walk at");
  }
  Walker walker(graph, encoder, options, truth);
  return walker.Run();
}

}  // namespace ptscope::synth
