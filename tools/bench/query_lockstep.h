// The lockstep test of PacketQuery (decode/src/flow/packet_query.h) against libipt's query
// decoder: both decode the same trace under the same sequence of calls, and every answer is
// compared (return value, status flags, ip, taken bit, event bytes, pt_qry_time's tsc, lost MTC
// and CYC counts, the trace offset and the sync offset), after every call.
//
// The calls are a decoder's: sync forward; then while libipt has an event pending, events;
// otherwise a conditional branch, and where libipt answers -pte_bad_query (no TNT bit ahead), an
// indirect branch; resynchronise after an error, stop at the end. Mixed in, calls that must fail
// without consuming anything: an event query while TNT bits are cached, a conditional branch in
// front of a TIP. Which of those run where is decided by a counter, the same for both decoders.
// PacketQuery may refuse (kRefused, refused()); the comparison of that trace stops there and the
// refusal is counted.
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <string>

namespace ptscope::tools {

struct LockstepTotals {
  uint64_t calls = 0;     // queries compared
  uint64_t events = 0;    // events among them
  uint64_t overflows = 0; // overflow events among those
  uint64_t syncs = 0;
  uint64_t refusals = 0;  // traces PacketQuery refused
};

// Compares the two decoders on `config`'s trace. False and `difference` at the first answer that
// differs.
bool CompareQueries(const pt_config& config, LockstepTotals& totals, std::string* difference);

}  // namespace ptscope::tools
