// The instruction listing (see insn_listing.h).
#include "listing/insn_listing.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ptscope::decode {

void InsnWriter::Write(uint32_t tid, uint64_t address) {
  if (used_ + 48 > sizeof buffer_) Flush();
  char digits[20];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + tid % 10);
    tid /= 10;
  } while (tid != 0);
  while (n > 0) buffer_[used_++] = digits[--n];
  buffer_[used_++] = ' ';
  buffer_[used_++] = '0';
  buffer_[used_++] = 'x';
  static constexpr char kHex[] = "0123456789abcdef";
  n = 0;
  do {
    digits[n++] = kHex[address & 0xf];
    address >>= 4;
  } while (address != 0);
  while (n > 0) buffer_[used_++] = digits[--n];
  buffer_[used_++] = '\n';
}

void InsnWriter::Flush() {
  if (used_ != 0 && std::fwrite(buffer_, 1, used_, out_) != used_) failed_ = true;
  used_ = 0;
}

Result<std::unique_ptr<InsnListing>> InsnListing::Open(const std::string& path,
                                                       const std::vector<Stream>& streams,
                                                       const std::vector<uint32_t>& selected) {
  const bool to_stdout = path == "-";
  std::FILE* file = to_stdout ? stdout : std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return Unexpected(Errc::kIo, path + ": cannot create the output file (" +
                                     std::strerror(errno) + ")");
  }
  return std::unique_ptr<InsnListing>(new InsnListing(file, to_stdout, path, streams, selected));
}

InsnListing::InsnListing(std::FILE* file, bool to_stdout, const std::string& path,
                         const std::vector<Stream>& streams, const std::vector<uint32_t>& selected)
    : file_(file),
      to_stdout_(to_stdout),
      path_(path),
      streams_(streams),
      selected_(selected),
      writer_(file),
      first_errors_(streams.size()) {}

InsnListing::~InsnListing() {
  if (file_ != nullptr && !to_stdout_) std::fclose(file_);
}

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
      for (size_t i = run.first_insn; i < end; ++i) writer_.Write(stream.key.tid, events.insns[i]);
      continue;
    }
    if (run.thread.tid == 0 || !Selected(selected_, run.thread) || run.first_insn >= end) continue;
    // (A stretch that goes on in the next unit is a run of its own there, timed at that unit's
    // start: the sort below keeps its parts in order.)
    runs_.push_back(Run{run.thread.tid, run.time_ns, {}});
    runs_.back().insns.assign(events.insns.begin() + run.first_insn, events.insns.begin() + end);
  }
}

Status InsnListing::Finish(DecodeSummary& summary) {
  // A thread's stretches from all CPUs, in time order (equal times: in the order decoded).
  std::stable_sort(runs_.begin(), runs_.end(), [](const Run& a, const Run& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    return a.time_ns < b.time_ns;
  });
  for (const Run& run : runs_) {
    for (uint64_t address : run.insns) writer_.Write(run.tid, address);
  }
  writer_.Flush();
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
  const bool failed = writer_.failed();
  std::FILE* file = file_;
  file_ = nullptr;
  if ((to_stdout_ ? std::fflush(file) : std::fclose(file)) != 0 || failed) {
    return Unexpected(Errc::kIo, path_ + ": write failed (disk full?)");
  }
  return Ok();
}

}  // namespace ptscope::decode
