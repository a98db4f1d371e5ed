#include "events.h"

#include <mutex>
#include <unordered_set>

namespace ptscope::decode {

EventText& EventText::operator=(std::string text) {
  if (text.empty()) {
    text_ = nullptr;
    return *this;
  }
  // Interned: a capture with a million overflows stores their one sentence once. The set's
  // nodes stay in place as it grows, so the pointers stay valid.
  static std::mutex mutex;
  static std::unordered_set<std::string> store;
  std::lock_guard lock(mutex);
  text_ = &*store.insert(std::move(text)).first;
  return *this;
}

const char* GapCauseName(GapCause cause) {
  switch (cause) {
    case GapCause::kOverflow: return "overflow";
    case GapCause::kLostData: return "lost data";
    case GapCause::kDecodeError: return "decode error";
    case GapCause::kMissingCode: return "missing code";
    case GapCause::kTraceStart: return "trace start";
  }
  return "unknown";
}

}  // namespace ptscope::decode
