#include "ptscope/result.h"

#include <cerrno>

namespace ptscope {

Errc ErrcFromErrno(int err) {
  if (err == ENOENT) return Errc::kNotFound;
  if (err == EACCES || err == EPERM || err == EROFS) return Errc::kPermission;
  return Errc::kIo;
}

const char* ErrcName(Errc code) {
  switch (code) {
    case Errc::kIo: return "io";
    case Errc::kNotFound: return "not-found";
    case Errc::kPermission: return "permission";
    case Errc::kBadMagic: return "bad-magic";
    case Errc::kUnsupportedVersion: return "unsupported-version";
    case Errc::kTruncated: return "truncated";
    case Errc::kChecksum: return "checksum";
    case Errc::kCorrupt: return "corrupt";
    case Errc::kInvalidArgument: return "invalid-argument";
    case Errc::kUnsupported: return "unsupported";
    case Errc::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace ptscope
