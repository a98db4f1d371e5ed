#include "sink/speedscope_sink.h"

#include <algorithm>

#include "ptscope/tool_version.h"
#include "sink/json_text.h"

namespace ptscope::decode {

SpeedscopeSink::SpeedscopeSink(std::unique_ptr<OutputFile> out, FrameNamer& namer)
    : out_(std::move(out)), names_(namer) {}

void SpeedscopeSink::BeginThread(const ThreadKey& thread, const std::string& process_name,
                                 const std::string& thread_name) {
  std::lock_guard lock(mutex_);
  ThreadLog& log = threads_[{thread.pid, thread.tid}];
  if (log.process_name.empty()) log.process_name = process_name;
  if (log.thread_name.empty()) log.thread_name = thread_name;
}

uint32_t SpeedscopeSink::FrameIndex(const ResolvedFrame& frame) {
  auto [entry, new_entry] = frame_of_entry_.try_emplace(frame.name, 0);
  if (new_entry) {
    auto [value, new_value] = frame_of_value_.try_emplace(
        {*frame.name, *frame.file, frame.line, *frame.module}, static_cast<uint32_t>(frames_.size()));
    if (new_value) frames_.push_back(frame);
    entry->second = value->second;
  }
  return entry->second;
}

void SpeedscopeSink::BeginLocked(const ThreadKey& thread, ThreadLog& log, uint64_t time_ns,
                                 const FrameId& frame) {
  const uint32_t index = FrameIndex(names_.Resolve(thread.pid, frame, time_ns));
  log.last_time = std::max(log.last_time, time_ns);
  log.events.push_back(Event{log.last_time, index, true});
  log.open.push_back(index);
}

void SpeedscopeSink::EndLocked(ThreadLog& log, uint64_t time_ns) {
  if (log.open.empty()) return;
  log.last_time = std::max(log.last_time, time_ns);
  log.events.push_back(Event{log.last_time, log.open.back(), false});
  log.open.pop_back();
}

void SpeedscopeSink::Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
                           bool) {
  std::lock_guard lock(mutex_);
  BeginLocked(thread, threads_[{thread.pid, thread.tid}], time_ns, frame);
}

void SpeedscopeSink::End(const ThreadKey& thread, uint64_t time_ns) {
  std::lock_guard lock(mutex_);
  EndLocked(threads_[{thread.pid, thread.tid}], time_ns);
}

void SpeedscopeSink::Instant(const ThreadKey& thread, uint64_t time_ns, const std::string&) {
  std::lock_guard lock(mutex_);
  ThreadLog& log = threads_[{thread.pid, thread.tid}];
  log.last_time = std::max(log.last_time, time_ns);
}

void SpeedscopeSink::WriteRecords(const ThreadKey& thread, const SliceRecord* records,
                                  size_t count) {
  std::lock_guard lock(mutex_);
  ThreadLog& log = threads_[{thread.pid, thread.tid}];
  for (const SliceRecord* r = records; r != records + count; ++r) {
    switch (r->type) {
      case SliceRecord::Type::kBegin: BeginLocked(thread, log, r->time_ns, r->frame); break;
      case SliceRecord::Type::kEnd: EndLocked(log, r->time_ns); break;
      case SliceRecord::Type::kInstant: log.last_time = std::max(log.last_time, r->time_ns); break;
    }
  }
}

void SpeedscopeSink::Finish() {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  finished_ = true;
  std::string chunk = "{\"$schema\": \"https://www.speedscope.app/file-format-schema.json\",\n";
  AppendJsonKey(chunk, "exporter");
  AppendJsonString(chunk, std::string("pt-decode ") + format::PtscopeVersion());
  chunk += ",\n";
  AppendJsonKey(chunk, "shared");
  chunk += "{\"frames\": [";
  for (size_t i = 0; i < frames_.size(); ++i) {
    const ResolvedFrame& f = frames_[i];
    chunk += i ? ",\n  {" : "\n  {";
    AppendJsonKey(chunk, "name");
    AppendJsonString(chunk, *f.name);
    if (!f.file->empty()) {
      chunk += ", ";
      AppendJsonKey(chunk, "file");
      AppendJsonString(chunk, *f.file);
      if (f.line != 0) chunk += ", \"line\": " + std::to_string(f.line);
    } else if (!f.module->empty()) {  // no line table: the module is what the viewer can show
      chunk += ", ";
      AppendJsonKey(chunk, "file");
      AppendJsonString(chunk, *f.module);
    }
    chunk += "}";
  }
  chunk += "]},\n\"profiles\": [";
  out_->Write(chunk);
  bool first_profile = true;
  for (auto& [key, log] : threads_) {
    while (!log.open.empty()) EndLocked(log, log.last_time);
    if (log.events.empty()) continue;
    std::string name = log.thread_name.empty() ? log.process_name : log.thread_name;
    if (!log.process_name.empty() && log.process_name != name) name = log.process_name + ": " + name;
    name += (name.empty() ? "" : " ") + std::to_string(key.first) + "/" + std::to_string(key.second);
    chunk = first_profile ? "\n {" : ",\n {";
    first_profile = false;
    chunk += "\"type\": \"evented\", ";
    AppendJsonKey(chunk, "name");
    AppendJsonString(chunk, name);
    chunk += ", \"unit\": \"nanoseconds\", \"startValue\": " +
             std::to_string(log.events.front().at) +
             ", \"endValue\": " + std::to_string(log.last_time) + ",\n  \"events\": [";
    for (size_t i = 0; i < log.events.size(); ++i) {
      const Event& e = log.events[i];
      if (i) chunk += i % 4 ? ", " : ",\n   ";
      chunk += e.open ? "{\"type\": \"O\", \"frame\": " : "{\"type\": \"C\", \"frame\": ";
      chunk += std::to_string(e.frame) + ", \"at\": " + std::to_string(e.at) + "}";
      if (chunk.size() > (1 << 16)) {
        out_->Write(chunk);
        chunk.clear();
      }
    }
    chunk += "]}";
    out_->Write(chunk);
  }
  out_->Write("]}\n");
  error_ = out_->Close();
}

}  // namespace ptscope::decode
