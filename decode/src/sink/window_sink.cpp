// Time-window clipping (see window_sink.h).
#include "sink/window_sink.h"

#include <algorithm>

namespace ptscope::decode {

void WindowSink::BeginThread(const ThreadKey& thread, const std::string& process_name,
                             const std::string& thread_name) {
  open_by_thread_[(uint64_t{thread.pid} << 32) | thread.tid].clear();
  inner_.BeginThread(thread, process_name, thread_name);
}

void WindowSink::EmitPending(uint64_t instructions) {
  for (Open& open : *open_) {
    if (open.emitted || open.begin.time_ns > to_) continue;
    SliceRecord begin = open.begin;
    if (begin.time_ns < from_) {
      begin.time_ns = from_;
      begin.instructions = instructions;
    }
    out_.push_back(begin);
    open.emitted = true;
  }
}

void WindowSink::Process(const SliceRecord& record) {
  switch (record.type) {
    case SliceRecord::Type::kBegin:
      open_->push_back(Open{record, false});
      if (record.time_ns >= from_ && record.time_ns <= to_) EmitPending(record.instructions);
      break;
    case SliceRecord::Type::kEnd: {
      if (open_->empty()) return;
      if (!open_->back().emitted && record.time_ns > from_ && open_->back().begin.time_ns <= to_) {
        EmitPending(record.instructions);  // it overlaps the window though nothing in it began
      }
      if (open_->back().emitted) {
        SliceRecord end = record;
        end.time_ns = std::min(record.time_ns, to_);
        out_.push_back(end);
      }
      open_->pop_back();
      break;
    }
    case SliceRecord::Type::kInstant:
      if (record.time_ns < from_ || record.time_ns > to_) return;
      EmitPending(record.instructions);
      out_.push_back(record);
      break;
  }
}

void WindowSink::Send(const ThreadKey& thread) {
  if (!out_.empty()) inner_.WriteRecords(thread, out_.data(), out_.size());
  out_.clear();
}

void WindowSink::WriteRecords(const ThreadKey& thread, const SliceRecord* records, size_t count) {
  open_ = &open_by_thread_[(uint64_t{thread.pid} << 32) | thread.tid];
  for (size_t i = 0; i < count; ++i) Process(records[i]);
  Send(thread);
}

void WindowSink::Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
                       bool inferred) {
  SliceRecord record;
  record.type = SliceRecord::Type::kBegin;
  record.time_ns = time_ns;
  record.frame = frame;
  record.inferred = inferred;
  WriteRecords(thread, &record, 1);
}

void WindowSink::End(const ThreadKey& thread, uint64_t time_ns) {
  SliceRecord record;
  record.type = SliceRecord::Type::kEnd;
  record.time_ns = time_ns;
  WriteRecords(thread, &record, 1);
}

void WindowSink::Instant(const ThreadKey& thread, uint64_t time_ns, const std::string& text) {
  SliceRecord record;
  record.type = SliceRecord::Type::kInstant;
  record.time_ns = time_ns;
  record.SetText(&text);
  WriteRecords(thread, &record, 1);
}

}  // namespace ptscope::decode
