// What a recorder does with the privilege it may have been installed with (set-uid root, or file
// capabilities such as CAP_PERFMON): it uses it only to open and map perf events (and to ptrace).
//  - Files are created as the invoking user (AsInvokingUser): a set-uid recorder cannot be made
//    to write, truncate or chmod a file the user could not, and the archive belongs to the user.
//  - The traced program runs as the invoking user (Target drops ids in the child before exec).
//  - Once the events are open and mapped, every privilege is given up (DropPrivileges), so the
//    long-running loop that reads rings and writes the archive holds none.
#pragma once

#include <sys/types.h>

#include "ptscope/result.h"

namespace ptscope::record {

// While alive, file system accesses (open, create, chmod) use the real uid and gid (setfsuid,
// setfsgid), so that they are checked, and new files owned, as for the invoking user. A no-op
// for a recorder that is not set-uid/set-gid.
class AsInvokingUser {
 public:
  AsInvokingUser();
  ~AsInvokingUser();
  AsInvokingUser(const AsInvokingUser&) = delete;
  AsInvokingUser& operator=(const AsInvokingUser&) = delete;

 private:
  uid_t saved_fsuid_ = 0;
  gid_t saved_fsgid_ = 0;
  bool changed_ = false;
};

// Returns to the real uid and gid (a set-uid install) and clears every capability.
Status DropPrivileges();

}  // namespace ptscope::record
