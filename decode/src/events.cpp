#include "events.h"

namespace ptscope::decode {

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
