#include "sink/text_sink.h"

#include <algorithm>

namespace ptscope::decode {

TextSink::TextSink(std::unique_ptr<OutputFile> out, FrameNamer& namer)
    : out_(std::move(out)), names_(namer) {}

TextSink::ThreadLog& TextSink::LogFor(const ThreadKey& thread) {
  return threads_[{thread.pid, thread.tid}];
}

void TextSink::BeginThread(const ThreadKey& thread, const std::string& process_name,
                           const std::string& thread_name) {
  std::lock_guard lock(mutex_);
  ThreadLog& log = LogFor(thread);
  if (log.process_name.empty()) log.process_name = process_name;
  if (log.thread_name.empty()) log.thread_name = thread_name;
}

void TextSink::Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
                     bool inferred) {
  std::lock_guard lock(mutex_);
  ThreadLog& log = LogFor(thread);
  ResolvedFrame r = names_.Resolve(thread.pid, frame, time_ns);
  std::string text = *r.name;
  if (inferred) text += " (inferred)";
  if (r.inlined) text += " (inlined)";
  if (!r.file->empty()) {
    text += "  " + *r.file;
    if (r.line != 0) text += ":" + std::to_string(r.line);
  }
  log.lines.push_back(Line{static_cast<uint32_t>(log.open.size()), time_ns, time_ns, false, false,
                           std::move(text)});
  log.open.push_back(log.lines.size() - 1);
  log.last_time = std::max(log.last_time, time_ns);
}

void TextSink::End(const ThreadKey& thread, uint64_t time_ns) {
  std::lock_guard lock(mutex_);
  ThreadLog& log = LogFor(thread);
  if (log.open.empty()) return;
  Line& line = log.lines[log.open.back()];
  line.end = std::max(time_ns, line.start);
  line.closed = true;
  log.open.pop_back();
  log.last_time = std::max(log.last_time, time_ns);
}

void TextSink::Instant(const ThreadKey& thread, uint64_t time_ns, const std::string& text) {
  std::lock_guard lock(mutex_);
  ThreadLog& log = LogFor(thread);
  log.lines.push_back(
      Line{static_cast<uint32_t>(log.open.size()), time_ns, time_ns, true, true, text});
  log.last_time = std::max(log.last_time, time_ns);
}

void TextSink::Finish() {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  finished_ = true;
  std::string chunk;
  for (auto& [key, log] : threads_) {
    chunk = "thread " + std::to_string(key.first) + "/" + std::to_string(key.second) + " \"" +
            log.process_name + "\" \"" + log.thread_name + "\"\n";
    for (const Line& line : log.lines) {
      chunk.append(2 * (line.depth + 1), ' ');
      chunk += "[" + std::to_string(line.start);
      if (line.is_instant) {
        chunk += "] ! " + line.text + "\n";
        continue;
      }
      uint64_t end = line.closed ? line.end : std::max(log.last_time, line.start);
      chunk += " +" + std::to_string(end - line.start) + "] " + line.text;
      if (!line.closed) chunk += " (unfinished)";
      chunk += "\n";
    }
    out_->Write(chunk);
  }
  error_ = out_->Close();
}

}  // namespace ptscope::decode
