#include "fake_frames.h"

#include <cstdio>

namespace ptscope::decode::testing {
namespace {
std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

const FakeFunction* FakeNamer::Find(uint64_t address) const {
  for (const FakeFunction& f : functions_) {
    if (address >= f.start && address < f.start + 0x100) return &f;
  }
  return nullptr;
}

FrameName FakeNamer::Name(uint32_t, uint64_t address, uint64_t) {
  ++name_calls[address];
  FrameName n;
  const FakeFunction* f = Find(address);
  n.name = f ? f->name : Hex(address);
  n.symbolized = f != nullptr;
  if (f) {
    if (f->has_debug_info) {
      n.file = f->name + ".c";
      n.line = static_cast<uint32_t>(address - f->start + 1);
    }
    n.module = "/bin/prog";
  }
  auto it = inlined_.find(address);
  if (it != inlined_.end()) n.inlined = it->second;
  return n;
}

uint32_t FakeNamer::InlineDepth(uint32_t, uint64_t address, uint64_t) {
  auto it = inlined_.find(address);
  return it == inlined_.end() ? 0 : static_cast<uint32_t>(it->second.size());
}

uint64_t FakeNamer::FunctionStart(uint32_t, uint64_t address, uint64_t) {
  const FakeFunction* f = Find(address);
  return f ? f->start : 0;
}

void TreeSink::CheckTime(uint64_t t) {
  if (t < last_time_) {
    violations.push_back("time " + std::to_string(t) + " after " + std::to_string(last_time_));
  }
  last_time_ = t;
}

void TreeSink::Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
                     bool inferred) {
  CheckTime(time_ns);
  std::string name;
  switch (frame.kind) {
    case FrameId::Kind::kFunction: name = namer_.Name(thread.pid, frame.address, time_ns).name; break;
    case FrameId::Kind::kSyscall: name = "[syscall]"; break;
    case FrameId::Kind::kUntraced: name = "[untraced]"; break;
    case FrameId::Kind::kInlined:
      name = namer_.Name(thread.pid, frame.address, time_ns).inlined.at(frame.inline_index).name +
             " (inlined)";
      break;
    default: name = "?"; break;
  }
  lines_.push_back(std::string(2 * open_.size(), ' ') + name + (inferred ? "*" : "") + " " +
                   std::to_string(time_ns) + "-");
  open_.emplace_back(lines_.size() - 1, time_ns);
  max_depth = std::max(max_depth, open_.size());
}

void TreeSink::End(const ThreadKey&, uint64_t time_ns) {
  CheckTime(time_ns);
  if (open_.empty()) {
    violations.push_back("End without Begin at " + std::to_string(time_ns));
    return;
  }
  lines_[open_.back().first] += std::to_string(time_ns);
  open_.pop_back();
}

void TreeSink::Instant(const ThreadKey&, uint64_t time_ns, const std::string& text) {
  CheckTime(time_ns);
  lines_.push_back(std::string(2 * open_.size(), ' ') + "! " + text + " @" +
                   std::to_string(time_ns));
}

std::string TreeSink::Tree() const {
  std::string out;
  for (const std::string& l : lines_) out += l + "\n";
  if (!open_.empty()) out += "(unclosed: " + std::to_string(open_.size()) + ")\n";
  return out;
}

}  // namespace ptscope::decode::testing
