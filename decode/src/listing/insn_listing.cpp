// The instruction listing (see insn_listing.h).
#include "listing/insn_listing.h"

#include <algorithm>
#include <cstdint>
#include <span>

namespace ptscope::decode {

void InsnWriter::Write(uint32_t tid, uint64_t address) {
  char* at = out_->Extend(48);  // 10 digits, " 0x", 16 hex digits, "\n"
  char digits[20];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + tid % 10);
    tid /= 10;
  } while (tid != 0);
  while (n > 0) *at++ = digits[--n];
  *at++ = ' ';
  *at++ = '0';
  *at++ = 'x';
  static constexpr char kHex[] = "0123456789abcdef";
  n = 0;
  do {
    digits[n++] = kHex[address & 0xf];
    address >>= 4;
  } while (address != 0);
  while (n > 0) *at++ = digits[--n];
  *at++ = '\n';
  out_->Commit(at);
}

Result<std::unique_ptr<InsnListing>> InsnListing::Open(const std::string& path,
                                                       const std::vector<Stream>& streams,
                                                       const std::vector<uint32_t>& selected) {
  PTSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> out, OutputFile::Open(path));
  return std::unique_ptr<InsnListing>(new InsnListing(std::move(out), streams, selected));
}

InsnListing::InsnListing(std::unique_ptr<OutputFile> out, const std::vector<Stream>& streams,
                         const std::vector<uint32_t>& selected)
    : out_(std::move(out)),
      streams_(streams),
      selected_(selected),
      writer_(out_.get()),
      first_errors_(streams.size()),
      stream_listed_(streams.size()) {}

void InsnListing::Consume(const WorkUnit& work, const UnitEvents& events) {
  const Stream& stream = streams_[work.stream];
  instructions_ += events.stats.instructions;
  counts_.Add(events.stats.counts);
  std::string& first_error = first_errors_[work.stream];
  if (first_error.empty()) first_error = events.stats.first_error;
  for (size_t r = 0; r < events.runs.size(); ++r) {
    const UnitEvents::Run& run = events.runs[r];
    const size_t end = r + 1 < events.runs.size() ? events.runs[r + 1].first_insn
                                                  : events.insns.size();
    if (stream.cpu < 0) {
      stream_listed_[work.stream] = true;
      for (size_t i = run.first_insn; i < end; ++i) writer_.Write(stream.key.tid, events.insns[i]);
      continue;
    }
    if (run.thread.tid == 0 || !Selected(selected_, run.thread) || run.first_insn >= end) continue;
    // (A stretch that goes on in the next unit is a run of its own there, timed at that unit's
    // start: the sort below keeps its parts in order.)
    runs_.Add(run.thread.tid, run.time_ns,
              std::span<const uint64_t>(events.insns.data() + run.first_insn, end - run.first_insn));
  }
}

Status InsnListing::Finish(DecodeSummary& summary) {
  // A thread's stretches from all CPUs, in time order (equal times: in the order decoded).
  // Threads: each per-thread stream decoded, and each thread of the per-CPU runs (they come by
  // thread: one more at each change).
  auto threads = static_cast<size_t>(
      std::count(stream_listed_.begin(), stream_listed_.end(), true));
  uint64_t last_tid = UINT64_MAX;
  PTSCOPE_TRY(runs_.Replay([&](uint32_t tid, std::span<const uint64_t> addresses) {
    if (tid != last_tid) ++threads;
    last_tid = tid;
    for (uint64_t address : addresses) writer_.Write(tid, address);
  }));
  summary.threads = threads;
  summary.instructions += instructions_;
  summary.stats.Add(counts_);
  for (size_t s = 0; s < streams_.size(); ++s) {
    for (const Piece& piece : streams_[s].pieces) {
      if (!piece.loss_before.empty()) summary.stats[Stat::kLostDataGaps]++;
    }
    if (!first_errors_[s].empty()) {
      summary.notes.push_back(StreamName(streams_[s]) + ": first decode error: " +
                              first_errors_[s]);
    }
  }
  if (std::string error = out_->Close(); !error.empty()) return Unexpected(Errc::kIo, error);
  return Ok();
}

}  // namespace ptscope::decode
