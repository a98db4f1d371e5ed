// ipt-block-loop: the decode-speed baseline of scripts/bench. A bare libipt block-decoder loop
// (pt_blk_next, events drained, nothing printed) over every PT stream of an archive, with one
// image per process built from the MMAP2 sideband over a shared iscache, as a careful libipt user
// would write it. Prints one machine-readable line:
//   ipt-block-loop instructions=N seconds=S insns_per_s=R pt_bytes=B pt_mb_per_s=M streams=K errors=E
// `seconds` covers decoding only (not reading the archive).
//
// --walker decodes with pt-decode's QueryWalker instead (our PacketQuery for the packets, our own
// instruction walk, in the decoder's configuration); --compare-walker runs libipt's block decoder
// and the walker side by side and fails at the first block, event or status that differs. With
// --libipt-packets first, the walker reads packets with libipt's query decoder instead (the
// walker pt-decode falls back to where PacketQuery refuses).
// --compare-query runs libipt's query decoder and our PacketQuery in lockstep (query_lockstep.h),
// each stream with the capture's errata and again with BDM70, SKD007 and SKL168 forced on;
// --compare-query-raw BASE.ptar INPUT... does the same on decode fuzz inputs (u32 PT length, PT),
// with BASE's configuration.
// --damage SEED and --overflow SEED change each stream before it is decoded (bytes overwritten;
// overflows as the hardware reports them), and --write-pt FILE writes the changed stream instead.
#include <intel-pt.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ptscope/capture.h"
#include "ptscope/format.h"
#include "ptscope/perf_records.h"
#include "capture/decoder_setup.h"
#include "flow/query_walker.h"
#include "query_lockstep.h"

namespace {

using ptscope::format::Archive;

struct Mapping {
  std::string path;
  uint64_t addr = 0, len = 0, pgoff = 0;
};

// Executable file mappings per pid (COMM exec resets, FORK of a new process copies).
bool CollectMappings(const Archive& archive, std::map<uint32_t, std::vector<Mapping>>* by_pid,
                     std::string* error) {
  std::vector<ptscope::format::SidebandProblem> problems = ptscope::format::ForEachSidebandRecord(
      archive, [&](ptscope::perf::Record&& record) {
        const auto& body = record.body;
        if (const auto* m = std::get_if<ptscope::perf::MmapRecord>(&body)) {
          const bool exec = !m->is_mmap2 || (m->prot & PROT_EXEC) != 0;
          if (exec && !m->filename.empty() && m->filename[0] == '/') {
            (*by_pid)[m->pid].push_back({m->filename, m->addr, m->len, m->pgoff});
          }
        } else if (const auto* c = std::get_if<ptscope::perf::CommRecord>(&body)) {
          if (c->exec) (*by_pid)[c->pid].clear();
        } else if (const auto* t = std::get_if<ptscope::perf::TaskRecord>(&body)) {
          if (!t->is_exit && t->pid != t->ppid) (*by_pid)[t->pid] = (*by_pid)[t->ppid];
        }
      });
  if (!problems.empty()) {
    *error = problems.front().Describe();
    return false;
  }
  return true;
}

uint64_t MetadataNumber(const Archive& archive, const char* key) {
  auto value = archive.Get(key);
  return value ? std::strtoull(value->c_str(), nullptr, 0) : 0;
}

struct Totals {
  uint64_t instructions = 0, errors = 0, bytes = 0, streams = 0;
  uint64_t unsupported = 0;  // --walker: stretches the walker refused (decoded by nobody here)
  uint64_t compared_blocks = 0, compared_events = 0;  // --compare-walker
  uint64_t joined_blocks = 0;  // --compare-walker: libipt blocks joined to the one before
  ptscope::tools::LockstepTotals queries;  // --compare-query
};

// --compare-query: the lockstep of PacketQuery against libipt's query decoder on one trace,
// with the configuration's errata and with those PacketQuery models forced on.
bool CompareQuery(const pt_config& config, Totals& totals) {
  for (int forced = 0; forced < 2; ++forced) {
    pt_config run = config;
    if (forced != 0) run.errata.bdm70 = run.errata.skd007 = run.errata.skl168 = 1;
    std::string difference;
    if (!ptscope::tools::CompareQueries(run, totals.queries, &difference)) {
      std::fprintf(stderr, "ipt-block-loop: query decoders differ%s: %s\n",
                   forced != 0 ? " (errata forced)" : "", difference.c_str());
      return false;
    }
  }
  return true;
}

// One process's executable sections, as added to its image (later ones win where they overlap).
struct Section {
  int isid = 0;
  uint64_t addr = 0, len = 0;
};

// Code for the walker: the same iscache sections as the process's pt_image.
class SectionCode : public ptscope::decode::WalkerCode {
 public:
  SectionCode(pt_image_section_cache* iscache, const std::vector<Section>& sections)
      : iscache_(iscache), sections_(sections) {}
  bool Locate(uint64_t ip, int* isid, uint64_t* begin, uint64_t* end) override {
    for (auto it = sections_.rbegin(); it != sections_.rend(); ++it) {
      if (ip - it->addr >= it->len) continue;
      *isid = it->isid;
      *begin = it->addr;
      *end = it->addr + it->len;
      return true;
    }
    return false;
  }
  int Read(uint64_t ip, uint8_t* buffer, size_t size, int* isid, uint64_t* section_end) override {
    for (auto it = sections_.rbegin(); it != sections_.rend(); ++it) {
      if (ip - it->addr >= it->len) continue;
      *isid = it->isid;
      *section_end = it->addr + it->len;
      const uint64_t room = it->addr + it->len - ip;
      return pt_iscache_read(iscache_, buffer, std::min<uint64_t>(size, room), it->isid, ip);
    }
    return -pte_nomap;
  }

 private:
  pt_image_section_cache* iscache_;
  const std::vector<Section>& sections_;
};

// Decodes from one sync point until an error or the end of the stream.
int DecodeFromSync(pt_block_decoder* decoder, int status, Totals& totals) {
  for (;;) {
    while (status & pts_event_pending) {
      pt_event event;
      status = pt_blk_event(decoder, &event, sizeof event);
      if (status < 0) return status;
    }
    pt_block block;
    block.ninsn = 0;
    status = pt_blk_next(decoder, &block, sizeof block);
    totals.instructions += block.ninsn;
    if (status < 0) return status;
  }
}

// --flow-config: the block-ending options pt-decode's flow decoder needs (blocks end at calls and
// jumps, tick events for time), to tell libipt's own cost in that configuration from ours.
bool g_flow_config = false;
enum class WalkerMode { kNone, kDecode, kCompare, kQuery };
WalkerMode g_walker = WalkerMode::kNone;
// --damage SEED (with --compare-walker): one byte in 4 KiB of each stream overwritten at random,
// so that both decoders meet errors and resynchronize alike.
uint64_t g_damage_seed = 0;
// --overflow SEED: internal buffer overflows as the hardware reports them (AddOverflows).
uint64_t g_overflow_seed = 0;
// --write-pt FILE (instead of a decode): the archive's only PT stream, with --overflow's and
// --damage's changes, to FILE (tests/support/ptar_edit.py puts it back into a .ptar).
const char* g_write_pt = nullptr;

uint64_t NextRandom(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return state >> 17;
}

// Overflows put into a stream the way the hardware writes them (the SDM's OVF packet: after it,
// a FUP with the ip where tracing resumed, or, when it resumed with tracing off, nothing until
// TIP.PGE): before about one PSB in three, the packets from a random packet boundary after the
// previous PSB+ up to this PSB are dropped (what the overflow lost) and replaced by one of
//   OVF FUP(ip)           resolved while tracing
//   OVF CYC MTC FUP(ip)   the same, with timing packets between
//   OVF TIP.PGE(ip)       resolved with tracing off, enabled again
//   OVF PSB+ TIP.PGE(ip)  the same with a PSB while tracing was off: its PSB+ without the FUP
//                         (PacketEn was 0), the enable after its PSBEND
//   PSB ... OVF FUP(ip)   an overflow inside a PSB+: the header's packets before its FUP, then
//                         OVF and the FUP, the rest of the header lost
// where ip is the PSB+'s own FUP (copied: the last ip starts afresh at an OVF as in a PSB+), so
// the trace goes on where it did; and once, the stream ends right after an OVF and a FUP.
std::vector<uint8_t> AddOverflows(const std::vector<uint8_t>& bytes, uint64_t seed) {
  struct Psb {
    uint64_t offset = 0;       // the PSB
    uint64_t after_end = 0;    // the packet after its PSBEND
    uint64_t fup_offset = 0;   // its FUP
    std::vector<uint8_t> fup;  // its FUP's bytes (empty: none)
  };
  pt_config config;
  pt_config_init(&config);
  config.begin = const_cast<uint8_t*>(bytes.data());
  config.end = const_cast<uint8_t*>(bytes.data()) + bytes.size();
  pt_packet_decoder* decoder = pt_pkt_alloc_decoder(&config);
  if (decoder == nullptr) return bytes;
  std::vector<Psb> psbs;
  std::vector<uint64_t> boundaries;  // of packets outside PSB+
  bool in_header = false;
  for (int status = pt_pkt_sync_forward(decoder); status >= 0;) {
    uint64_t offset = 0;
    pt_pkt_get_offset(decoder, &offset);
    pt_packet packet;
    status = pt_pkt_next(decoder, &packet, sizeof packet);
    if (status < 0) {
      if (status == -pte_eos) break;
      status = pt_pkt_sync_forward(decoder);  // (a damaged stretch: on from the next PSB)
      in_header = false;
      continue;
    }
    if (packet.type == ppt_psb) {
      psbs.push_back({offset, 0, 0, {}});
      in_header = true;
    } else if (in_header && packet.type == ppt_fup) {
      psbs.back().fup_offset = offset;
      psbs.back().fup.assign(bytes.begin() + static_cast<std::ptrdiff_t>(offset),
                             bytes.begin() + static_cast<std::ptrdiff_t>(offset + packet.size));
    } else if (in_header && packet.type == ppt_psbend) {
      psbs.back().after_end = offset + packet.size;
      in_header = false;
    } else if (!in_header) {
      boundaries.push_back(offset);
    }
  }
  pt_pkt_free_decoder(decoder);
  uint64_t state = seed;
  std::vector<uint8_t> out;
  uint64_t copied = 0;  // bytes of the input up to here are in `out` (or dropped)
  for (size_t i = 1; i < psbs.size(); ++i) {
    const Psb& psb = psbs[i];
    const Psb& previous = psbs[i - 1];
    if (psb.fup.empty() || psb.after_end == 0 || previous.after_end == 0 ||
        NextRandom(state) % 3 != 0) {
      continue;
    }
    // A packet boundary in [previous.after_end, psb.offset]: where the overflow began.
    auto first = std::lower_bound(boundaries.begin(), boundaries.end(), previous.after_end);
    auto last = std::lower_bound(boundaries.begin(), boundaries.end(), psb.offset);
    const size_t choices = static_cast<size_t>(last - first) + 1;
    const size_t pick = NextRandom(state) % choices;
    const uint64_t drop_from = pick + 1 == choices ? psb.offset : *(first + pick);
    if (drop_from < copied) continue;
    out.insert(out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(copied),
               bytes.begin() + static_cast<std::ptrdiff_t>(drop_from));
    const uint64_t variant = NextRandom(state) % 5;
    const auto at = [&](uint64_t offset) {
      return bytes.begin() + static_cast<std::ptrdiff_t>(offset);
    };
    if (variant == 4) {  // inside the PSB+
      out.insert(out.end(), at(psb.offset), at(psb.fup_offset));
      const uint8_t ovf[] = {0x02, 0xf3};
      out.insert(out.end(), ovf, ovf + 2);
      out.insert(out.end(), psb.fup.begin(), psb.fup.end());
      copied = psb.after_end;
      continue;
    }
    const uint8_t ovf[] = {0x02, 0xf3};
    out.insert(out.end(), ovf, ovf + 2);
    if (variant == 1) {
      const uint8_t timing[] = {0x0b, 0x59, 0x01};  // CYC(1) MTC(1)
      out.insert(out.end(), timing, timing + 3);
    }
    if (variant <= 1) out.insert(out.end(), psb.fup.begin(), psb.fup.end());
    copied = psb.offset;
    if (variant == 3) {  // the PSB+ without its FUP
      out.insert(out.end(), at(psb.offset), at(psb.fup_offset));
      out.insert(out.end(), at(psb.fup_offset + psb.fup.size()), at(psb.after_end));
      copied = psb.after_end;
    }
    if (variant >= 2) {
      out.push_back(static_cast<uint8_t>((psb.fup[0] & 0xe0) | 0x11));  // TIP.PGE, same ip
      out.insert(out.end(), psb.fup.begin() + 1, psb.fup.end());
    }
  }
  out.insert(out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(copied), bytes.end());
  // The end: an overflow that resolved while tracing, and nothing after its FUP.
  if (!psbs.empty() && !psbs.back().fup.empty()) {
    const uint8_t ovf[] = {0x02, 0xf3};
    out.insert(out.end(), ovf, ovf + 2);
    out.insert(out.end(), psbs.back().fup.begin(), psbs.back().fup.end());
  }
  return out;
}
bool g_own_packets = true;  // the walker's packets: PacketQuery (else libipt's query decoder)

using ptscope::decode::QueryWalker;

void DecodeWithWalker(const pt_config& config, SectionCode& code, Totals& totals) {
  QueryWalker walker(config, code, nullptr, g_own_packets);
  if (!walker.ok()) {
    ++totals.errors;
    return;
  }
  int status = walker.SyncForward();
  while (status != -pte_eos) {
    if (walker.packets_refused()) {  // (sticky: nothing more from this walker)
      ++totals.unsupported;
      break;
    }
    if (status == QueryWalker::kUnsupported) {
      ++totals.unsupported;
    } else if (status >= 0) {
      for (;;) {
        while (status >= 0 && status != QueryWalker::kUnsupported && (status & pts_event_pending)) {
          pt_event event;
          status = walker.Event(&event);
        }
        if (status < 0 || status == QueryWalker::kUnsupported || (status & pts_eos)) break;
        pt_block block;
        status = walker.Next(&block);
        totals.instructions += block.ninsn;
        if (status < 0 || status == QueryWalker::kUnsupported) break;
      }
      if (status == QueryWalker::kUnsupported) ++totals.unsupported;
      else if (status >= 0 || status == -pte_eos) break;
      else ++totals.errors;
    } else {
      ++totals.errors;
    }
    status = walker.SyncForward();
  }
}

bool SameBlock(const pt_block& a, const pt_block& b) {
  // libipt reports ptic_error for blocks taken from its block cache (the walker always knows).
  const bool iclass_ok = a.iclass == ptic_error || a.iclass == b.iclass;
  return a.ip == b.ip && a.end_ip == b.end_ip && a.ninsn == b.ninsn && a.isid == b.isid &&
         a.mode == b.mode && a.speculative == b.speculative && a.truncated == b.truncated &&
         iclass_ok;
}

void PrintBlock(const char* who, int status, const pt_block& b) {
  std::fprintf(stderr, "  %-6s status %d: block ip=0x%" PRIx64 " end_ip=0x%" PRIx64
               " ninsn=%u iclass=%d isid=%d mode=%d\n", who, status, b.ip, b.end_ip,
               static_cast<unsigned>(b.ninsn), static_cast<int>(b.iclass), b.isid,
               static_cast<int>(b.mode));
}

void PrintEvent(const char* who, int status, const pt_event& e) {
  std::fprintf(stderr, "  %-6s status %d: event type=%d ip_suppressed=%u status_update=%u "
               "has_tsc=%u tsc=%" PRIu64 " words=0x%" PRIx64 ",0x%" PRIx64 "\n", who, status,
               static_cast<int>(e.type), e.ip_suppressed, e.status_update, e.has_tsc, e.tsc,
               e.variant.async_branch.from, e.variant.async_branch.to);
}

// Lockstep: libipt's block decoder and the walker from the same sync points. Returns false at
// the first difference (printed with the trace offset).
bool CompareWalker(const pt_config& config, pt_image* image, SectionCode& code, Totals& totals) {
  pt_config blk_config = config;
  blk_config.flags.variant.block.end_on_call = 1;
  blk_config.flags.variant.block.end_on_jump = 1;
  blk_config.flags.variant.block.enable_tick_events = 1;
  pt_block_decoder* decoder = pt_blk_alloc_decoder(&blk_config);
  auto walker_owner = std::make_unique<QueryWalker>(config, code, nullptr, g_own_packets);
  QueryWalker* walker = walker_owner.get();
  if (decoder == nullptr || !walker->ok()) return false;
  // What PacketQuery refuses reads as unsupported, as pt-decode hands such units back.
  auto mapped = [&](int status) {
    return walker->packets_refused() ? QueryWalker::kUnsupported : status;
  };
  pt_blk_set_image(decoder, image);
  auto differ = [&](const char* what) {
    uint64_t offset = 0;
    pt_blk_get_offset(decoder, &offset);
    std::fprintf(stderr, "ipt-block-loop: walker differs from libipt (%s) at trace offset %" PRIu64
                 ", after %" PRIu64 " equal blocks and %" PRIu64 " equal events\n", what, offset,
                 totals.compared_blocks, totals.compared_events);
    return false;
  };
  int expected = pt_blk_sync_forward(decoder);
  int actual = mapped(walker->SyncForward());
  bool ok = true;
  bool unsynced = false;  // the walker was replaced and has not synchronised yet
  uint64_t stuck_offset = UINT64_MAX, stuck_since = 0;
  while (ok && expected != -pte_eos) {
    if (actual == QueryWalker::kUnsupported) {
      ++totals.unsupported;  // skip to the next sync point, both of them
    } else if (expected != actual) {
      ok = differ("status after sync");
      break;
    }
    while (ok && expected >= 0 && actual != QueryWalker::kUnsupported) {
      while (expected >= 0 && (expected & pts_event_pending)) {
        pt_event a, b;
        std::memset(&a, 0, sizeof a);
        std::memset(&b, 0, sizeof b);
        expected = pt_blk_event(decoder, &a, sizeof a);
        actual = mapped(walker->Event(&b));
        if (actual == QueryWalker::kUnsupported) break;
        if (expected != actual || std::memcmp(&a, &b, sizeof a) != 0) {
          PrintEvent("libipt", expected, a);
          PrintEvent("walker", actual, b);
          ok = differ("event");
          break;
        }
        ++totals.compared_events;
      }
      if (!ok || actual == QueryWalker::kUnsupported || expected < 0 || (expected & pts_eos)) break;
      pt_block a, b;
      expected = pt_blk_next(decoder, &a, sizeof a);
      actual = mapped(walker->Next(&b));
      if (actual == QueryWalker::kUnsupported) break;
      // libipt's block cache sometimes ends a block early, between two ordinary instructions
      // (where it stopped filling the cache): the next block continues it with nothing between.
      // The walker's blocks end only at branches, events and section ends: join libipt's.
      while (expected >= 0 && (expected & (pts_event_pending | pts_eos)) == 0 &&
             a.ninsn < b.ninsn && a.ninsn > 0 && a.ip == b.ip) {
        pt_block more;
        expected = pt_blk_next(decoder, &more, sizeof more);
        if (more.ninsn == 0 || more.isid != a.isid) break;
        a.ninsn = static_cast<uint16_t>(a.ninsn + more.ninsn);
        a.end_ip = more.end_ip;
        a.iclass = more.iclass;
        a.truncated = more.truncated;
        ++totals.joined_blocks;
      }
      if (expected != actual || !SameBlock(a, b)) {
        PrintBlock("libipt", expected, a);
        PrintBlock("walker", actual, b);
        ok = differ("block");
        break;
      }
      totals.instructions += a.ninsn;
      ++totals.compared_blocks;
      // Damaged trace can send both decoders round a loop of direct jumps that needs no trace;
      // after 2^20 instructions without a byte of trace, resynchronize (as pt-decode does).
      uint64_t offset = 0;
      pt_blk_get_offset(decoder, &offset);
      if (offset != stuck_offset) {
        stuck_offset = offset;
        stuck_since = totals.instructions;
      } else if (totals.instructions - stuck_since > (uint64_t{1} << 20)) {
        ++totals.errors;
        stuck_since = totals.instructions;
        expected = -pte_internal;
        break;
      }
    }
    if (!ok) break;
    if (actual == QueryWalker::kUnsupported) ++totals.unsupported;
    if (expected == -pte_eos || (expected >= 0 && (expected & pts_eos) &&
                                 actual != QueryWalker::kUnsupported)) {
      break;
    }
    if (expected < 0) ++totals.errors;  // both failed alike: resync
    expected = pt_blk_sync_forward(decoder);
    if (walker->packets_refused() || unsynced) {
      // A refusing PacketQuery answers nothing more: a new walker at libipt's sync point (at
      // the next one that libipt synchronises at without an error).
      walker_owner = std::make_unique<QueryWalker>(config, code, nullptr, g_own_packets);
      walker = walker_owner.get();
      uint64_t offset = 0;
      unsynced = expected < 0 || pt_blk_get_sync_offset(decoder, &offset) < 0;
      actual = unsynced ? QueryWalker::kUnsupported : mapped(walker->SyncSet(offset));
    } else {
      actual = mapped(walker->SyncForward());
    }
    if (actual == QueryWalker::kUnsupported) continue;
  }
  pt_blk_free_decoder(decoder);
  return ok;
}

bool DecodeStream(const Archive& archive, std::vector<uint8_t>& bytes, pt_image* image,
                  SectionCode& code, Totals& totals) {
  pt_config config;
  pt_config_init(&config);
  if (g_flow_config) {
    config.flags.variant.block.end_on_call = 1;
    config.flags.variant.block.end_on_jump = 1;
    config.flags.variant.block.enable_tick_events = 1;
  }
  config.begin = bytes.data();
  config.end = bytes.data() + bytes.size();
  config.cpuid_0x15_eax = static_cast<uint32_t>(MetadataNumber(archive, "pt.cpuid15_eax"));
  config.cpuid_0x15_ebx = static_cast<uint32_t>(MetadataNumber(archive, "pt.cpuid15_ebx"));
  config.mtc_freq = static_cast<uint8_t>(MetadataNumber(archive, "pt.mtc_period"));
  config.nom_freq = static_cast<uint8_t>(MetadataNumber(archive, "pt.max_nonturbo_ratio"));
  if (g_walker == WalkerMode::kQuery) {
    auto setup = ptscope::decode::SetupFromMetadata(archive);
    if (setup.has_value()) setup.value().Apply(config);
    return CompareQuery(config, totals);
  }
  if (g_walker == WalkerMode::kDecode) {
    DecodeWithWalker(config, code, totals);
    return true;
  }
  if (g_walker == WalkerMode::kCompare) return CompareWalker(config, image, code, totals);
  pt_block_decoder* decoder = pt_blk_alloc_decoder(&config);
  if (decoder == nullptr) {
    ++totals.errors;
    return true;
  }
  pt_blk_set_image(decoder, image);
  for (int status = pt_blk_sync_forward(decoder); status != -pte_eos; status = pt_blk_sync_forward(decoder)) {
    if (status >= 0) status = DecodeFromSync(decoder, status, totals);
    if (status == -pte_eos) break;
    ++totals.errors;  // re-sync at the next PSB
  }
  pt_blk_free_decoder(decoder);
  return true;
}

}  // namespace

// --compare-query-raw: decode fuzz inputs (u32 little-endian PT length N, N bytes of PT, the
// sideband after it ignored), with the configuration of the capture they were cut from.
int CompareQueryRaw(int argc, char** argv) {
  auto base = ptscope::format::OpenCapture(argv[2]);
  if (!base.has_value()) {
    std::fprintf(stderr, "ipt-block-loop: %s\n", base.error().message.c_str());
    return 2;
  }
  auto setup = ptscope::decode::SetupFromMetadata(base.value());
  Totals totals;
  for (int i = 3; i < argc; ++i) {
    std::FILE* file = std::fopen(argv[i], "rb");
    if (file == nullptr) {
      std::fprintf(stderr, "ipt-block-loop: cannot read %s\n", argv[i]);
      return 2;
    }
    std::vector<uint8_t> input;
    for (int c; (c = std::fgetc(file)) != EOF;) input.push_back(static_cast<uint8_t>(c));
    std::fclose(file);
    if (input.size() < 4) continue;
    const uint32_t size = input[0] | input[1] << 8 | input[2] << 16 | uint32_t{input[3]} << 24;
    std::vector<uint8_t> bytes(input.begin() + 4, input.begin() + 4 + std::min<size_t>(size, input.size() - 4));
    pt_config config;
    pt_config_init(&config);
    if (setup.has_value()) setup.value().Apply(config);
    config.begin = bytes.data();
    config.end = bytes.data() + bytes.size();
    if (!CompareQuery(config, totals)) {
      std::fprintf(stderr, "  in %s\n", argv[i]);
      return 1;
    }
    ++totals.streams;
  }
  std::printf("query inputs=%" PRIu64 " compared_queries=%" PRIu64 " compared_events=%" PRIu64
              " compared_overflows=%" PRIu64 " syncs=%" PRIu64 " refused=%" PRIu64 "\n",
              totals.streams, totals.queries.calls, totals.queries.events,
              totals.queries.overflows, totals.queries.syncs, totals.queries.refusals);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--libipt-packets") {
    g_own_packets = false;
    ++argv;
    --argc;
  }
  if (argc >= 3 && std::string(argv[1]) == "--compare-query-raw") return CompareQueryRaw(argc, argv);
  // The options with a value, in any order, before the mode.
  for (bool more = true; more && argc >= 4;) {
    const std::string option = argv[1];
    more = option == "--damage" || option == "--overflow" || option == "--write-pt";
    if (option == "--damage") g_damage_seed = std::strtoull(argv[2], nullptr, 0);
    if (option == "--overflow") g_overflow_seed = std::strtoull(argv[2], nullptr, 0);
    if (option == "--write-pt") g_write_pt = argv[2];
    if (more) {
      argv += 2;
      argc -= 2;
    }
  }
  if (argc == 3) {
    const std::string option = argv[1];
    if (option == "--flow-config") g_flow_config = true;
    if (option == "--walker") g_walker = WalkerMode::kDecode;
    if (option == "--compare-walker") g_walker = WalkerMode::kCompare;
    if (option == "--compare-query") g_walker = WalkerMode::kQuery;
    if (g_flow_config || g_walker != WalkerMode::kNone) {
      argv[1] = argv[2];
      argc = 2;
    }
  }
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: ipt-block-loop [--libipt-packets] [--damage SEED] [--overflow SEED]\n"
                 "         [--write-pt FILE | --flow-config | --walker | --compare-walker |\n"
                 "          --compare-query] ARCHIVE.ptar\n"
                 "       ipt-block-loop --compare-query-raw BASE.ptar INPUT...\n");
    return 2;
  }
  auto archive_or = ptscope::format::OpenCapture(argv[1]);
  if (!archive_or.has_value()) {
    std::fprintf(stderr, "ipt-block-loop: %s\n", archive_or.error().message.c_str());
    return 2;
  }
  const Archive& archive = archive_or.value();
  std::map<uint32_t, std::vector<Mapping>> mappings;
  std::string error;
  if (!CollectMappings(archive, &mappings, &error)) {
    std::fprintf(stderr, "ipt-block-loop: %s: %s\n", argv[1], error.c_str());
    return 2;
  }
  // Streams, their pieces concatenated in stream_offset order (one decode per snapshot).
  std::map<std::pair<uint32_t, uint32_t>, std::vector<const ptscope::format::PtDataChunk*>> streams;
  for (const auto& piece : archive.pt_data) streams[{piece.stream_id, piece.snapshot_index}].push_back(&piece);
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> inputs;  // (pid, bytes)
  for (auto& [key, pieces] : streams) {
    std::stable_sort(pieces.begin(), pieces.end(), [](auto* a, auto* b) { return a->stream_offset < b->stream_offset; });
    std::vector<uint8_t> bytes;
    for (const auto* piece : pieces) bytes.insert(bytes.end(), piece->data.begin(), piece->data.end());
    inputs.emplace_back(pieces.front()->pid, std::move(bytes));
  }
  pt_image_section_cache* iscache = pt_iscache_alloc("ipt-block-loop");
  std::map<uint32_t, pt_image*> images;
  std::map<uint32_t, std::vector<Section>> sections;
  for (const auto& [pid, maps] : mappings) {
    pt_image* image = pt_image_alloc(nullptr);
    for (const Mapping& m : maps) {
      const int isid = pt_iscache_add_file(iscache, m.path.c_str(), m.pgoff, m.len, m.addr);
      if (isid < 0 || pt_image_add_cached(image, iscache, isid, nullptr) < 0) {
        std::fprintf(stderr, "ipt-block-loop: warning: pid %u: cannot map %s at 0x%" PRIx64 "\n", pid,
                     m.path.c_str(), m.addr);
      }
    }
    images[pid] = image;
    for (const Mapping& m : maps) {
      // (the isid again, from the cache: adding a file a second time returns the same one)
      const int isid = pt_iscache_add_file(iscache, m.path.c_str(), m.pgoff, m.len, m.addr);
      if (isid >= 0) sections[pid].push_back({isid, m.addr, m.len});
    }
  }
  Totals totals;
  int exit_status = 0;  // (set where the loop stops early)
  bool wrote_pt = false;
  const auto start = std::chrono::steady_clock::now();
  for (auto& [pid, bytes] : inputs) {
    auto image = images.find(pid);
    if (bytes.empty() || (image == images.end() && g_walker != WalkerMode::kQuery)) continue;
    SectionCode code(iscache, sections[pid]);
    if (g_overflow_seed != 0) bytes = AddOverflows(bytes, g_overflow_seed);
    if (g_damage_seed != 0) {
      uint64_t state = g_damage_seed;
      for (size_t i = 0; i < bytes.size() / 4096 + 1; ++i) {
        const uint64_t at = NextRandom(state) % bytes.size();
        bytes[at] = static_cast<uint8_t>(state >> 56);
      }
    }
    if (g_write_pt != nullptr) {
      std::FILE* file = inputs.size() == 1 ? std::fopen(g_write_pt, "wb") : nullptr;
      const bool written = file != nullptr &&
                           std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
      if (file == nullptr || std::fclose(file) != 0 || !written) {
        std::fprintf(stderr, "ipt-block-loop: %s: %s\n", g_write_pt,
                     inputs.size() == 1 ? "cannot write" : "the archive has more than one stream");
        exit_status = 1;
      }
      wrote_pt = true;
      break;
    }
    if (!DecodeStream(archive, bytes, image == images.end() ? nullptr : image->second, code,
                      totals)) {
      exit_status = 1;
      break;
    }
    totals.bytes += bytes.size();
    ++totals.streams;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& [pid, image] : images) pt_image_free(image);
  pt_iscache_free(iscache);
  if (g_write_pt != nullptr && !wrote_pt) {
    std::fprintf(stderr,
                 "ipt-block-loop: %s: no per-thread PT stream to write (--write-pt takes a "
                 "capture of one)\n",
                 argv[1]);
    return 1;
  }
  // (--write-pt, or a comparison that failed and said where: no totals.)
  if (g_write_pt != nullptr || exit_status != 0) return exit_status;
  const double rate = seconds > 0 ? totals.instructions / seconds : 0;
  const double mbps = seconds > 0 ? totals.bytes / seconds / 1e6 : 0;
  std::printf("ipt-block-loop instructions=%" PRIu64 " seconds=%.3f insns_per_s=%.0f pt_bytes=%" PRIu64
              " pt_mb_per_s=%.2f streams=%" PRIu64 " errors=%" PRIu64 "\n",
              totals.instructions, seconds, rate, totals.bytes, mbps, totals.streams, totals.errors);
  if (g_walker == WalkerMode::kQuery) {
    std::printf("query compared_queries=%" PRIu64 " compared_events=%" PRIu64
                " compared_overflows=%" PRIu64 " syncs=%" PRIu64 " refused=%" PRIu64 "\n",
                totals.queries.calls, totals.queries.events, totals.queries.overflows,
                totals.queries.syncs, totals.queries.refusals);
  } else if (g_walker != WalkerMode::kNone) {
    std::printf("walker unsupported=%" PRIu64 " compared_blocks=%" PRIu64 " compared_events=%" PRIu64
                " joined_blocks=%" PRIu64 "\n", totals.unsupported, totals.compared_blocks,
                totals.compared_events, totals.joined_blocks);
  }
  return totals.errors == 0 ? 0 : 1;
}
