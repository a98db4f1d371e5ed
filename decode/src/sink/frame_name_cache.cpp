#include "sink/frame_name_cache.h"

namespace ptscope::decode {
namespace {
const std::string kEmpty;
const std::string kSyscallName = "[syscall]";
const std::string kUntracedName = "[untraced]";
const std::string kGapName = "[gap]";
const std::string kTriggerName = "[trigger]";
const std::string kFoldedName = "[folded]";
const std::string kUnknownInlined = "[inlined]";

ResolvedFrame Synthetic(const std::string& name) {
  ResolvedFrame r;
  r.name = &name;
  r.file = &kEmpty;
  r.module = &kEmpty;
  return r;
}
}  // namespace

ResolvedFrame FrameNameCache::Resolve(uint32_t pid, const FrameId& frame, uint64_t time_ns) {
  switch (frame.kind) {
    case FrameId::Kind::kSyscall: return Synthetic(kSyscallName);
    case FrameId::Kind::kUntraced: return Synthetic(kUntracedName);
    case FrameId::Kind::kGap: return Synthetic(kGapName);
    case FrameId::Kind::kTrigger: return Synthetic(kTriggerName);
    case FrameId::Kind::kFolded: return Synthetic(kFoldedName);
    case FrameId::Kind::kFunction:
    case FrameId::Kind::kInlined: break;
  }
  auto [it, inserted] = names_.try_emplace(Key{pid, frame.address});
  if (inserted) it->second = namer_.Name(pid, frame.address, time_ns);
  const FrameName& n = it->second;
  ResolvedFrame r;
  r.address = frame.address;
  r.has_address = true;
  r.module = &n.module;
  if (frame.kind == FrameId::Kind::kFunction) {
    r.name = &n.name;
    r.file = &n.file;
    r.line = n.line;
    return r;
  }
  r.inlined = true;
  if (frame.inline_index >= n.inlined.size()) {
    r.name = &kUnknownInlined;
    r.file = &kEmpty;
    return r;
  }
  const FrameName::Inlined& inl = n.inlined[frame.inline_index];
  r.name = &inl.name;
  r.file = &inl.file;
  r.line = inl.line;
  return r;
}

}  // namespace ptscope::decode
