// Names FrameIds for the sinks, calling FrameNamer::Name once per distinct (pid, address).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "events.h"

namespace ptscope::decode {

// What a sink shows for one frame. Pointers stay valid for the cache's lifetime.
struct ResolvedFrame {
  const std::string* name = nullptr;
  const std::string* file = nullptr;    // may point to an empty string
  uint32_t line = 0;
  const std::string* module = nullptr;  // may point to an empty string
  uint64_t address = 0;                 // function entry (or call site for inlined frames)
  bool inlined = false;
  bool has_address = false;             // false for synthetic frames ([syscall], ...)
};

class FrameNameCache {
 public:
  explicit FrameNameCache(FrameNamer& namer) : namer_(namer) {}
  ResolvedFrame Resolve(uint32_t pid, const FrameId& frame, uint64_t time_ns);
  uint64_t distinct_names() const { return names_.size(); }

 private:
  struct Key {
    uint32_t pid;
    uint64_t address;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.address * 0x9e3779b97f4a7c15ull ^ k.pid);
    }
  };
  FrameNamer& namer_;
  std::unordered_map<Key, FrameName, KeyHash> names_;
};

}  // namespace ptscope::decode
