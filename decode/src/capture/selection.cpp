// Thread and time selection (see selection.h).
#include "capture/selection.h"

#include <algorithm>
#include <cstdio>

namespace ptscope::decode {
namespace {

std::string Grouped(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// A --time-range bound as it is written: the largest unit that divides it ("5ms", "1500us").
std::string TimeOption(uint64_t ns) {
  for (auto [unit, scale] : {std::pair{"s", 1'000'000'000ull}, {"ms", 1'000'000ull}, {"us", 1'000ull}}) {
    if (ns != 0 && ns % scale == 0) return std::to_string(ns / scale) + unit;
  }
  return std::to_string(ns) + "ns";
}

std::string Quoted(const std::string& name) { return name.empty() ? "(no name)" : "\"" + name + "\""; }

}  // namespace

std::string FormatDuration(uint64_t ns) {
  char text[64];
  if (ns < 10'000) std::snprintf(text, sizeof text, "%llu ns", static_cast<unsigned long long>(ns));
  else if (ns < 10'000'000) std::snprintf(text, sizeof text, "%.3f us", ns / 1e3);
  else if (ns < 10'000'000'000ull) std::snprintf(text, sizeof text, "%.3f ms", ns / 1e6);
  else std::snprintf(text, sizeof text, "%.3f s", ns / 1e9);
  return text;
}

bool SelectsAny(const std::vector<uint32_t>& threads, const std::vector<Stream>& streams,
                const SidebandTimeline& timeline) {
  if (threads.empty()) return !streams.empty();
  bool per_cpu = false;
  for (const Stream& stream : streams) {
    if (stream.cpu < 0 && Selected(threads, stream.key)) return true;
    per_cpu |= stream.cpu >= 0;
  }
  if (!per_cpu) return false;
  for (const ThreadKey& thread : timeline.ScheduledThreads()) {
    if (Selected(threads, thread)) return true;
  }
  return false;
}

Unexpected NoSuchThreads(const std::string& path, const std::vector<uint32_t>& threads,
                         const Result<DecodeSummary>& counted) {
  std::string ids;
  for (uint32_t id : threads) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  std::string message = path + ": --threads " + ids + ": no thread or process of the capture has " +
                        (threads.size() == 1 ? "that id" : "those ids");
  if (!counted) return Unexpected(Errc::kInvalidArgument, message + " (" + counted.error().message + ")");
  std::vector<ThreadCount> list = counted->per_thread;
  std::sort(list.begin(), list.end(), [](const ThreadCount& a, const ThreadCount& b) {
    return a.pid != b.pid ? a.pid < b.pid : a.tid < b.tid;
  });
  message += "; it holds " + std::to_string(list.size()) + (list.size() == 1 ? " thread" : " threads") +
             " (tid, pid, names, instructions decoded):";
  for (const ThreadCount& t : list) {
    message += "\n  " + std::to_string(t.tid) + " " + Quoted(t.thread) + " in process " +
               std::to_string(t.pid) + " " + Quoted(t.process) + ": " + Grouped(t.instructions) +
               " instructions";
  }
  return Unexpected(Errc::kInvalidArgument, message);
}

Unexpected WindowOutsideCapture(const std::string& path, uint64_t from_ns, uint64_t to_ns,
                              uint64_t span_ns) {
  std::string window = (from_ns == 0 ? "" : TimeOption(from_ns)) + ":" +
                       (to_ns == UINT64_MAX ? "" : TimeOption(to_ns));
  return Unexpected(Errc::kInvalidArgument,
                    path + ": --time-range " + window + " lies outside the capture, which spans 0 ns to " +
                        FormatDuration(span_ns) + " (times are relative to its start)");
}

}  // namespace ptscope::decode
