// Giving up what pt-record no longer needs once its perf events are open and mapped: a set-uid
// install returns to the real user, and every capability (CAP_PERFMON, CAP_SYS_ADMIN,
// CAP_IPC_LOCK, ...) is cleared, so the long-running loop that reads rings and writes the archive
// holds no privilege.
#pragma once

#include "ptscope/result.h"

namespace ptscope::record {

Status DropPrivileges();

}  // namespace ptscope::record
