#include "sink/folded_sink.h"

#include <algorithm>

namespace ptscope::decode {

FoldedSink::FoldedSink(std::unique_ptr<OutputFile> out, FrameNamer& namer)
    : out_(std::move(out)), names_(namer), nodes_(1) {}

void FoldedSink::Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame, bool) {
  std::lock_guard lock(mutex_);
  BeginLocked(thread, threads_[{thread.pid, thread.tid}], time_ns, frame);
}

void FoldedSink::WriteRecords(const ThreadKey& thread, const SliceRecord* records, size_t count) {
  std::lock_guard lock(mutex_);
  ThreadStack& stack = threads_[{thread.pid, thread.tid}];
  for (const SliceRecord* r = records; r != records + count; ++r) {
    switch (r->type) {
      case SliceRecord::Type::kBegin: BeginLocked(thread, stack, r->time_ns, r->frame); break;
      case SliceRecord::Type::kEnd: EndLocked(stack, r->time_ns); break;
      case SliceRecord::Type::kInstant: stack.last_time = std::max(stack.last_time, r->time_ns); break;
    }
  }
}

void FoldedSink::BeginLocked(const ThreadKey& thread, ThreadStack& stack, uint64_t time_ns,
                             const FrameId& frame) {
  uint32_t parent = stack.open.empty() ? 0 : stack.open.back().node;
  uint32_t* cached = child_of_.TryEmplace(ChildKey{parent, thread.pid, frame}).first;
  if (*cached == 0) {  // frames with equal names share the node: look it up by name
    const std::string* name = names_.Resolve(thread.pid, frame, time_ns).name;
    auto found = nodes_[parent].children.find(name);
    if (found != nodes_[parent].children.end()) {
      *cached = found->second + 1;
    } else {
      uint32_t index = static_cast<uint32_t>(nodes_.size());
      nodes_[parent].children.emplace(name, index);  // before push_back moves the nodes
      Node node;
      node.name = name;
      node.parent = parent;
      nodes_.push_back(std::move(node));
      *cached = index + 1;
    }
  }
  stack.open.push_back(OpenSlice{*cached - 1, time_ns, 0});
  stack.last_time = std::max(stack.last_time, time_ns);
}

void FoldedSink::End(const ThreadKey& thread, uint64_t time_ns) {
  std::lock_guard lock(mutex_);
  EndLocked(threads_[{thread.pid, thread.tid}], time_ns);
}

void FoldedSink::EndLocked(ThreadStack& stack, uint64_t time_ns) {
  if (stack.open.empty()) return;
  OpenSlice slice = stack.open.back();
  stack.open.pop_back();
  uint64_t duration = time_ns > slice.start ? time_ns - slice.start : 0;
  nodes_[slice.node].self_ns += duration > slice.child_ns ? duration - slice.child_ns : 0;
  if (!stack.open.empty()) stack.open.back().child_ns += duration;
  stack.last_time = std::max(stack.last_time, time_ns);
}

void FoldedSink::Instant(const ThreadKey& thread, uint64_t time_ns, const std::string&) {
  std::lock_guard lock(mutex_);
  ThreadStack& stack = threads_[{thread.pid, thread.tid}];
  stack.last_time = std::max(stack.last_time, time_ns);
}

std::string FoldedSink::PathOf(uint32_t node) const {
  std::vector<const std::string*> names;
  for (uint32_t n = node; n != 0; n = nodes_[n].parent) names.push_back(nodes_[n].name);
  std::string path;
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    if (!path.empty()) path += ';';
    // ';' separates frames and ' ' the weight: keep both out of names.
    for (char c : **it) path += (c == ';' || c == '\n') ? ':' : c;
  }
  return path;
}

void FoldedSink::Finish() {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  finished_ = true;
  for (auto& [key, stack] : threads_) {
    while (!stack.open.empty()) EndLocked(stack, stack.last_time);
  }
  std::map<std::string, uint64_t> lines;  // merges equal names from different frames; sorts
  for (uint32_t n = 1; n < nodes_.size(); ++n) {
    if (nodes_[n].self_ns != 0) lines[PathOf(n)] += nodes_[n].self_ns;
  }
  for (const auto& [path, weight] : lines) out_->Write(path + " " + std::to_string(weight) + "\n");
  error_ = out_->Close();
}

}  // namespace ptscope::decode
