#include "sink/summary_sink.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <tuple>

#include "sink/json_text.h"

namespace ptscope::decode {
namespace {

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

uint64_t Since(uint64_t end, uint64_t start) { return end > start ? end - start : 0; }

}  // namespace

void SummarySink::Totals::Add(const Totals& o) {
  calls += o.calls;
  total_ns += o.total_ns;
  self_ns += o.self_ns;
  max_ns = std::max(max_ns, o.max_ns);
  insns += o.insns;
  self_insns += o.self_insns;
}

SummarySink::SummarySink(std::unique_ptr<OutputFile> out, FrameNamer& namer, size_t top,
                         Encoding encoding)
    : out_(std::move(out)), names_(namer), top_(top), encoding_(encoding) {}

void SummarySink::SetCaptureTotals(const DecodeSummary& totals) {
  std::lock_guard lock(mutex_);
  totals_ = totals;
}

SummarySink::ThreadState& SummarySink::StateFor(const ThreadKey& thread) {
  if (last_state_ != nullptr && last_state_->key == thread) return *last_state_;
  std::unique_ptr<ThreadState>& state = threads_[{thread.pid, thread.tid}];
  if (state == nullptr) {
    state = std::make_unique<ThreadState>();
    state->key = thread;
  }
  last_state_ = state.get();
  return *state;
}

void SummarySink::BeginThread(const ThreadKey& thread, const std::string& process_name,
                              const std::string& thread_name) {
  std::lock_guard lock(mutex_);
  ThreadState& state = StateFor(thread);
  if (state.process_name.empty()) state.process_name = process_name;
  if (state.thread_name.empty()) state.thread_name = thread_name;
}

void SummarySink::Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame, bool) {
  std::lock_guard lock(mutex_);
  ThreadState& state = StateFor(thread);
  BeginLocked(state, time_ns, state.last_insns, frame);
}

void SummarySink::End(const ThreadKey& thread, uint64_t time_ns) {
  std::lock_guard lock(mutex_);
  ThreadState& state = StateFor(thread);
  EndLocked(state, time_ns, state.last_insns);
}

void SummarySink::Instant(const ThreadKey& thread, uint64_t time_ns, const std::string&) {
  std::lock_guard lock(mutex_);
  ThreadState& state = StateFor(thread);
  state.last_time = std::max(state.last_time, time_ns);
}

void SummarySink::WriteRecords(const ThreadKey& thread, const SliceRecord* records,
                               size_t count) {
  std::lock_guard lock(mutex_);
  ThreadState& state = StateFor(thread);
  for (const SliceRecord* r = records; r != records + count; ++r) {
    if (r->instructions != 0) have_instructions_ = true;
    switch (r->type) {
      case SliceRecord::Type::kBegin: BeginLocked(state, r->time_ns, r->instructions, r->frame); break;
      case SliceRecord::Type::kEnd: EndLocked(state, r->time_ns, r->instructions); break;
      case SliceRecord::Type::kInstant:
        state.last_time = std::max(state.last_time, r->time_ns);
        state.last_insns = std::max(state.last_insns, r->instructions);
        break;
    }
  }
}

void SummarySink::BeginLocked(ThreadState& state, uint64_t time_ns, uint64_t insns,
                              const FrameId& frame) {
  time_ns = std::max(time_ns, state.last_time);
  insns = std::max(insns, state.last_insns);
  state.last_time = time_ns;
  state.last_insns = insns;
  auto [slot, inserted] = state.index.TryEmplace(frame);
  if (inserted) {
    *slot = static_cast<uint32_t>(state.functions.size() + 1);
    state.functions.push_back(Function{frame, time_ns, 0, 0, 0, {}});
  }
  uint32_t index = *slot - 1;
  Function& function = state.functions[index];
  ++function.totals.calls;
  if (function.active++ == 0) {
    function.outer_start_ns = time_ns;
    function.outer_start_insns = insns;
  }
  state.open.push_back(OpenSlice{index, time_ns, insns});
}

void SummarySink::EndLocked(ThreadState& state, uint64_t time_ns, uint64_t insns) {
  if (state.open.empty()) return;
  time_ns = std::max(time_ns, state.last_time);
  insns = std::max(insns, state.last_insns);
  state.last_time = time_ns;
  state.last_insns = insns;
  OpenSlice slice = state.open.back();
  state.open.pop_back();
  Function& function = state.functions[slice.function];
  uint64_t duration = time_ns - slice.start_ns;
  uint64_t retired = insns - slice.start_insns;
  Totals& totals = function.totals;
  totals.self_ns += Since(duration, slice.child_ns);
  totals.self_insns += Since(retired, slice.child_insns);
  totals.max_ns = std::max(totals.max_ns, duration);
  if (--function.active == 0) {
    totals.total_ns += time_ns - function.outer_start_ns;
    totals.insns += insns - function.outer_start_insns;
  }
  if (!state.open.empty()) {
    state.open.back().child_ns += duration;
    state.open.back().child_insns += retired;
  }
}

void SummarySink::AddRows(ThreadState& state, Rows& rows) {
  for (const Function& function : state.functions) {
    ResolvedFrame r = names_.Resolve(state.key.pid, function.frame, function.first_time);
    rows[{*r.name, r.inlined, Basename(*r.module)}].Add(function.totals);
  }
}

std::vector<SummarySink::Row> SummarySink::Sorted(const Rows& rows) const {
  std::vector<Row> order;
  for (const auto& [key, totals] : rows) order.emplace_back(&key, &totals);
  std::stable_sort(order.begin(), order.end(), [](const Row& a, const Row& b) {
    if (a.second->total_ns != b.second->total_ns) return a.second->total_ns > b.second->total_ns;
    if (a.second->calls != b.second->calls) return a.second->calls > b.second->calls;
    return *a.first < *b.first;  // name, inlined, module
  });
  if (top_ != 0 && order.size() > top_) order.resize(top_);
  return order;
}

std::string SummarySink::Table(const Rows& rows) const {
  std::vector<Row> order = Sorted(rows);
  std::string text;
  char line[256];
  if (have_instructions_) {
    std::snprintf(line, sizeof line, "%10s %14s %14s %14s %14s %14s  %s\n", "calls", "total_ns",
                  "self_ns", "max_ns", "insns", "self_insns", "function [module]");
  } else {
    std::snprintf(line, sizeof line, "%10s %14s %14s %14s  %s\n", "calls", "total_ns", "self_ns",
                  "max_ns", "function [module]");
  }
  text += line;
  for (const auto& [key, t] : order) {
    if (have_instructions_) {
      std::snprintf(line, sizeof line,
                    "%10" PRIu64 " %14" PRIu64 " %14" PRIu64 " %14" PRIu64 " %14" PRIu64
                    " %14" PRIu64 "  ",
                    t->calls, t->total_ns, t->self_ns, t->max_ns, t->insns, t->self_insns);
    } else {
      std::snprintf(line, sizeof line, "%10" PRIu64 " %14" PRIu64 " %14" PRIu64 " %14" PRIu64 "  ",
                    t->calls, t->total_ns, t->self_ns, t->max_ns);
    }
    text += line;
    const auto& [name, inlined, module] = *key;
    text += name;
    if (inlined) text += " (inlined)";
    if (!module.empty()) text += " [" + module + "]";
    text += '\n';
  }
  return text;
}

namespace {

void AppendNumber(std::string& out, const char* key, uint64_t value) {
  out += ", \"";
  out += key;
  out += "\": ";
  out += std::to_string(value);
}

}  // namespace

// One row per line, so that the file reads (and diffs) like the text table.
std::string SummarySink::JsonRows(const Rows& rows, const std::string& indent) const {
  std::string out = "[";
  bool first = true;
  for (const auto& [key, t] : Sorted(rows)) {
    const auto& [name, inlined, module] = *key;
    out += first ? "\n" : ",\n";
    first = false;
    out += indent + "{";
    AppendJsonKey(out, "function");
    AppendJsonString(out, name);
    out += ", ";
    AppendJsonKey(out, "module");
    AppendJsonString(out, module);
    out += inlined ? ", \"inlined\": true" : ", \"inlined\": false";
    AppendNumber(out, "calls", t->calls);
    AppendNumber(out, "total_ns", t->total_ns);
    AppendNumber(out, "self_ns", t->self_ns);
    AppendNumber(out, "max_ns", t->max_ns);
    AppendNumber(out, "insns", t->insns);
    AppendNumber(out, "self_insns", t->self_insns);
    out += "}";
  }
  if (!first) out += "\n" + indent.substr(0, indent.size() - 1);
  out += "]";
  return out;
}

std::string SummarySink::Json(const Rows& all, const std::vector<Rows>& per_thread,
                              uint64_t calls) const {
  static constexpr std::pair<GapCause, const char*> kGapKeys[] = {
      {GapCause::kOverflow, "overflow"},
      {GapCause::kLostData, "lost_data"},
      {GapCause::kDecodeError, "decode_error"},
      {GapCause::kMissingCode, "missing_code"}};
  const DecodeSummary& c = totals_;
  std::string out = "{\"schema\": \"ptscope-summary\", \"version\": " +
                    std::to_string(kSummaryJsonVersion) + ", \"times\": \"ns\",\n \"capture\": {";
  out += "\"threads\": " + std::to_string(c.threads);
  AppendNumber(out, "instructions", c.instructions);
  AppendNumber(out, "symbolized_instructions", c.symbolized_instructions);
  AppendNumber(out, "span_ns", c.first_ns <= c.last_ns ? c.last_ns - c.first_ns : 0);
  AppendNumber(out, "traced_ns", c.traced_ns);
  AppendNumber(out, "gap_ns", c.gap_ns);
  AppendNumber(out, "calls", calls);
  out += ", \"gaps\": {";
  for (const auto& [cause, key] : kGapKeys) {
    if (cause != GapCause::kOverflow) out += ", ";
    AppendJsonKey(out, key);
    out += std::to_string(c.stats[GapStat(cause)]);
  }
  out += "}, \"missing_modules\": [";
  for (size_t i = 0; i < c.missing.size(); ++i) {
    out += i == 0 ? "{" : ", {";
    AppendJsonKey(out, "path");
    AppendJsonString(out, c.missing[i].path);
    out += ", ";
    AppendJsonKey(out, "build_id");
    AppendJsonHex(out, c.missing[i].build_id);
    out += "}";
  }
  out += "]},\n \"instructions_counted\": ";
  out += have_instructions_ ? "true" : "false";
  out += ",\n \"functions\": " + JsonRows(all, "  ") + ",\n \"threads\": [";
  size_t i = 0;
  for (const auto& [key, state] : threads_) {
    out += i == 0 ? "\n  {" : ",\n  {";
    out += "\"pid\": " + std::to_string(key.first) + ", \"tid\": " +
           std::to_string(key.second) + ", ";
    AppendJsonKey(out, "process");
    AppendJsonString(out, state->process_name);
    out += ", ";
    AppendJsonKey(out, "thread");
    AppendJsonString(out, state->thread_name);
    out += ", \"functions\": " + JsonRows(per_thread[i++], "   ") + "}";
  }
  out += threads_.empty() ? "]\n}\n" : "\n ]\n}\n";
  return out;
}

void SummarySink::Finish() {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  finished_ = true;
  Rows all;
  std::vector<Rows> per_thread;
  uint64_t calls = 0;
  for (auto& [key, state] : threads_) {
    while (!state->open.empty()) EndLocked(*state, state->last_time, state->last_insns);
    per_thread.emplace_back();
    AddRows(*state, per_thread.back());
    for (const auto& [row, totals] : per_thread.back()) {
      all[row].Add(totals);
      calls += totals.calls;
    }
  }
  // Over all threads a function's max is the longest single call anywhere (Add keeps the max).
  if (encoding_ == Encoding::kJson) {
    out_->Write(Json(all, per_thread, calls));
    error_ = out_->Close();
    return;
  }
  std::string text = "pt-decode summary: " + std::to_string(threads_.size()) + " thread" +
                     (threads_.size() == 1 ? "" : "s") + ", " + std::to_string(calls) + " calls";
  if (top_ != 0) text += ", top " + std::to_string(top_) + " functions per table";
  text += "\ntimes in ns; total = inclusive (recursive calls counted once), self = exclusive, "
          "max = longest call\n\nall threads\n" + Table(all);
  out_->Write(text);
  size_t i = 0;
  for (auto& [key, state] : threads_) {
    text = "\nthread " + std::to_string(key.first) + "/" + std::to_string(key.second) + " \"" +
           state->process_name + "\" \"" + state->thread_name + "\"\n" + Table(per_thread[i++]);
    out_->Write(text);
  }
  error_ = out_->Close();
}

}  // namespace ptscope::decode
