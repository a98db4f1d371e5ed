#include "events.h"

#include <deque>
#include <mutex>

namespace ptscope::decode {

EventText& EventText::operator=(std::string text) {
  if (text.empty()) {
    text_ = nullptr;
    return *this;
  }
  // A deque keeps its elements in place as it grows: the pointers stay valid.
  static std::mutex mutex;
  static std::deque<std::string> store;
  std::lock_guard lock(mutex);
  text_ = &store.emplace_back(std::move(text));
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
