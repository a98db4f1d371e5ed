// CompareQueries (see query_lockstep.h).
#include "query_lockstep.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>

#include "flow/packet_query.h"

namespace ptscope::tools {
namespace {

using decode::PacketQuery;

// One answer of a decoder: the return value and whatever the call wrote.
struct Answer {
  int status = 0;
  uint64_t ip = 0;
  int taken = -1;
  pt_event event{};
  // After the call.
  int time_status = 0;
  uint64_t tsc = 0;
  uint32_t lost_mtc = 0, lost_cyc = 0;
  int offset_status = 0, sync_status = 0;
  uint64_t offset = 0, sync_offset = 0;
};

std::string Describe(const char* call, const Answer& a) {
  char text[512];
  std::snprintf(text, sizeof text,
                "%s: status %d ip 0x%" PRIx64 " taken %d event type %d (ip_suppressed %u "
                "status_update %u has_tsc %u tsc %" PRIu64 " lost %u/%u) time %d tsc %" PRIu64
                " lost %u/%u offset %d:%" PRIu64 " sync %d:%" PRIu64,
                call, a.status, a.ip, a.taken, a.event.type, a.event.ip_suppressed,
                a.event.status_update, a.event.has_tsc, a.event.tsc, a.event.lost_mtc,
                a.event.lost_cyc, a.time_status, a.tsc, a.lost_mtc, a.lost_cyc, a.offset_status,
                a.offset, a.sync_status, a.sync_offset);
  return text;
}

bool Same(const Answer& a, const Answer& b) {
  return a.status == b.status && a.ip == b.ip && a.taken == b.taken &&
         std::memcmp(&a.event, &b.event, sizeof a.event) == 0 && a.time_status == b.time_status &&
         a.tsc == b.tsc && a.lost_mtc == b.lost_mtc && a.lost_cyc == b.lost_cyc &&
         a.offset_status == b.offset_status && a.offset == b.offset &&
         a.sync_status == b.sync_status && a.sync_offset == b.sync_offset;
}

enum class Call { kSync, kCond, kIndirect, kEvent };

void Observe(pt_query_decoder* libipt, Answer& a) {
  a.time_status = pt_qry_time(libipt, &a.tsc, &a.lost_mtc, &a.lost_cyc);
  a.offset_status = pt_qry_get_offset(libipt, &a.offset);
  a.sync_status = pt_qry_get_sync_offset(libipt, &a.sync_offset);
}

void Observe(PacketQuery& own, Answer& a) {
  a.time_status = own.Time(&a.tsc, &a.lost_mtc, &a.lost_cyc);
  a.offset_status = own.GetOffset(&a.offset);
  a.sync_status = own.GetSyncOffset(&a.sync_offset);
}

Answer Ask(pt_query_decoder* libipt, Call call) {
  Answer a;
  switch (call) {
    case Call::kSync: a.status = pt_qry_sync_forward(libipt, &a.ip); break;
    case Call::kCond: a.status = pt_qry_cond_branch(libipt, &a.taken); break;
    case Call::kIndirect: a.status = pt_qry_indirect_branch(libipt, &a.ip); break;
    case Call::kEvent: a.status = pt_qry_event(libipt, &a.event, sizeof a.event); break;
  }
  Observe(libipt, a);
  return a;
}

Answer Ask(PacketQuery& own, Call call) {
  Answer a;
  switch (call) {
    case Call::kSync: a.status = own.SyncForward(&a.ip); break;
    case Call::kCond: a.status = own.CondBranch(&a.taken); break;
    case Call::kIndirect: a.status = own.IndirectBranch(&a.ip); break;
    case Call::kEvent: a.status = own.Event(&a.event); break;
  }
  Observe(own, a);
  return a;
}

}  // namespace

bool CompareQueries(const pt_config& config, LockstepTotals& totals, std::string* difference) {
  pt_config query_config = config;
  std::memset(&query_config.flags, 0, sizeof query_config.flags);
  pt_query_decoder* libipt = pt_qry_alloc_decoder(&query_config);
  if (libipt == nullptr) {
    *difference = "pt_qry_alloc_decoder failed";
    return false;
  }
  std::unique_ptr<PacketQuery> own = std::make_unique<PacketQuery>(config);
  static const char* const kNames[] = {"sync", "cond", "indirect", "event"};
  uint64_t step = 0;
  bool ok = true;
  bool refused = false;  // PacketQuery refused since the last sync
  // Asks both; returns libipt's answer (`ok` false when they differ).
  auto both = [&](Call call) {
    ++step;
    const Answer expected = Ask(libipt, call);
    const Answer actual = Ask(*own, call);
    if (own->refused()) {
      refused = true;
      return expected;
    }
    ++totals.calls;
    if (call == Call::kEvent && expected.status >= 0) ++totals.events;
    if (call == Call::kEvent && expected.status >= 0 && expected.event.type == ptev_overflow) {
      ++totals.overflows;
    }
    if (call == Call::kSync) ++totals.syncs;
    if (!Same(expected, actual)) {
      ok = false;
      *difference = "call " + std::to_string(step) + ": libipt " +
                    Describe(kNames[static_cast<int>(call)], expected) + "\n  ours   " +
                    Describe(kNames[static_cast<int>(call)], actual);
    }
    return expected;
  };
  Answer sync = both(Call::kSync);
  while (ok) {
    if (refused) {
      // Counted; the comparison goes on from libipt's next PSB, both decoders started there
      // afresh (pt_qry_sync_set and SyncSet): damaged trace is compared around the damage.
      ++totals.refusals;
      refused = false;
      const int status = pt_qry_sync_forward(libipt, &sync.ip);
      uint64_t offset = 0;
      if (status == -pte_eos || pt_qry_get_sync_offset(libipt, &offset) < 0) break;
      own = std::make_unique<PacketQuery>(config);
      ++step;
      Answer expected, actual;
      expected.status = pt_qry_sync_set(libipt, &expected.ip, offset);
      Observe(libipt, expected);
      actual.status = own->SyncSet(&actual.ip, offset);
      Observe(*own, actual);
      if (own->refused()) {
        refused = true;
        continue;
      }
      if (!Same(expected, actual)) {
        ok = false;
        *difference = "call " + std::to_string(step) + ": libipt " + Describe("sync_set", expected) +
                      "\n  ours   " + Describe("sync_set", actual);
        break;
      }
      sync = expected;
    }
    if (sync.status == -pte_eos) break;
    int status = sync.status;
    bool tnt_cached = false;  // libipt's last cond answer said more bits may follow
    while (ok && !refused && status >= 0) {
      if ((status & pts_event_pending) != 0) {
        status = both(Call::kEvent).status;
        continue;
      }
      if ((status & pts_eos) != 0) break;
      // A call that must fail without consuming anything, now and then.
      if (step % 11 == 3 && tnt_cached) {
        const Answer probe = both(Call::kEvent);
        if (probe.status != -pte_bad_query) break;  // (libipt consumed something: resync)
        continue;
      }
      const Answer cond = both(Call::kCond);
      if (cond.status >= 0) {
        status = cond.status;
        tnt_cached = cond.status == 0;
        continue;
      }
      tnt_cached = false;
      if (cond.status != -pte_bad_query) break;
      status = both(Call::kIndirect).status;
    }
    if (!ok || refused) continue;
    sync = both(Call::kSync);
  }
  pt_qry_free_decoder(libipt);
  return ok;
}

}  // namespace ptscope::tools
