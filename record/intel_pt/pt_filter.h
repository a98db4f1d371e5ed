// --filter: Intel PT address filters in pt-record's symbolic form, turned into the kernel's
// PERF_EVENT_IOC_SET_FILTER syntax ("filter 0xOFFSET/SIZE@/path"), where the number is a file
// offset inside the object (the kernel places it in every mapping of that file).
#pragma once

#include <string>

#include "ptscope/result.h"

namespace ptscope::record {

// Accepts comma-separated items "ACTION WHAT @ FILE" with ACTION filter|start|stop and WHAT a
// symbol name or 0xOFFSET[/SIZE]. A symbol's size is its st_size (filter needs one).
Result<std::string> ResolvePtFilter(const std::string& text);

}  // namespace ptscope::record
