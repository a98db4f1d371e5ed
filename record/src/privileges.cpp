#include "privileges.h"

#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ptscope::record {

AsInvokingUser::AsInvokingUser() {
  if (geteuid() == getuid() && getegid() == getgid()) return;
  // Leaving fsuid 0 also clears CAP_DAC_OVERRIDE & co. from the effective set (capabilities(7)).
  saved_fsgid_ = static_cast<gid_t>(setfsgid(getgid()));
  saved_fsuid_ = static_cast<uid_t>(setfsuid(getuid()));
  changed_ = true;
}

AsInvokingUser::~AsInvokingUser() {
  if (!changed_) return;
  setfsuid(saved_fsuid_);
  setfsgid(saved_fsgid_);
}

Status DropPrivileges() {
  gid_t rgid = getgid();
  uid_t ruid = getuid();
  if (getegid() != rgid && setresgid(rgid, rgid, rgid) != 0)
    return MakeError(Errc::kPermission, std::string("setresgid failed: ") + std::strerror(errno));
  if (geteuid() != ruid && setresuid(ruid, ruid, ruid) != 0)
    return MakeError(Errc::kPermission, std::string("setresuid failed: ") + std::strerror(errno));
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  header.pid = 0;
  __user_cap_data_struct data[2];
  std::memset(data, 0, sizeof data);
  if (syscall(SYS_capset, &header, data) != 0)
    return MakeError(Errc::kPermission, std::string("capset (clearing capabilities) failed: ") +
                                            std::strerror(errno));
  return Ok();
}

}  // namespace ptscope::record
