#include "pt_privileges.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ptscope::record {

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
