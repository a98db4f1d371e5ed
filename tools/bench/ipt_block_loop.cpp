// ipt-block-loop: the decode-speed baseline of scripts/bench. A bare libipt block-decoder loop
// (pt_blk_next, events drained, nothing printed) over every PT stream of an archive, with one
// image per process built from the MMAP2 sideband over a shared iscache, as a careful libipt user
// would write it. Prints one machine-readable line:
//   ipt-block-loop instructions=N seconds=S insns_per_s=R pt_bytes=B pt_mb_per_s=M streams=K errors=E
// `seconds` covers decoding only (not reading the archive).
#include <intel-pt.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ptscope/format.h"
#include "ptscope/perf_records.h"

namespace {

using ptscope::format::Archive;

struct Mapping {
  std::string path;
  uint64_t addr = 0, len = 0, pgoff = 0;
};

// Executable file mappings per pid (COMM exec resets, FORK of a new process copies).
bool CollectMappings(const Archive& archive, std::map<uint32_t, std::vector<Mapping>>* by_pid,
                     std::string* error) {
  std::map<uint32_t, ptscope::perf::RecordLayout> layouts;
  for (const auto& attr : archive.sideband_attrs) layouts[attr.attr_id] = {attr.sample_type, attr.sample_id_all};
  for (const auto& chunk : archive.sideband) {
    auto layout = layouts.find(chunk.attr_id);
    if (layout == layouts.end()) {
      *error = "a sideband chunk names attr_id " + std::to_string(chunk.attr_id) + " that has no SidebandAttr chunk";
      return false;
    }
    ptscope::perf::RecordIterator records(chunk.records, layout->second);
    while (auto parsed = records.Next()) {
      if (!parsed->has_value()) {
        *error = "sideband record at offset " + std::to_string(records.offset()) + ": " + parsed->error().message;
        return false;
      }
      const auto& body = parsed->value().body;
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
    }
  }
  return true;
}

uint64_t MetadataNumber(const Archive& archive, const char* key) {
  auto value = archive.Get(key);
  return value ? std::strtoull(value->c_str(), nullptr, 0) : 0;
}

struct Totals {
  uint64_t instructions = 0, errors = 0, bytes = 0, streams = 0;
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

void DecodeStream(const Archive& archive, std::vector<uint8_t>& bytes, pt_image* image, Totals& totals) {
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
  pt_block_decoder* decoder = pt_blk_alloc_decoder(&config);
  if (decoder == nullptr) {
    ++totals.errors;
    return;
  }
  pt_blk_set_image(decoder, image);
  for (int status = pt_blk_sync_forward(decoder); status != -pte_eos; status = pt_blk_sync_forward(decoder)) {
    if (status >= 0) status = DecodeFromSync(decoder, status, totals);
    if (status == -pte_eos) break;
    ++totals.errors;  // re-sync at the next PSB
  }
  pt_blk_free_decoder(decoder);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--flow-config") {
    g_flow_config = true;
    argv[1] = argv[2];
    argc = 2;
  }
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: ipt-block-loop [--flow-config] ARCHIVE.ptar\n");
    return 2;
  }
  auto archive_or = ptscope::format::ReadArchive(argv[1]);
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
  }
  Totals totals;
  const auto start = std::chrono::steady_clock::now();
  for (auto& [pid, bytes] : inputs) {
    auto image = images.find(pid);
    if (bytes.empty() || image == images.end()) continue;
    DecodeStream(archive, bytes, image->second, totals);
    totals.bytes += bytes.size();
    ++totals.streams;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& [pid, image] : images) pt_image_free(image);
  pt_iscache_free(iscache);
  const double rate = seconds > 0 ? totals.instructions / seconds : 0;
  const double mbps = seconds > 0 ? totals.bytes / seconds / 1e6 : 0;
  std::printf("ipt-block-loop instructions=%" PRIu64 " seconds=%.3f insns_per_s=%.0f pt_bytes=%" PRIu64
              " pt_mb_per_s=%.2f streams=%" PRIu64 " errors=%" PRIu64 "\n",
              totals.instructions, seconds, rate, totals.bytes, mbps, totals.streams, totals.errors);
  return totals.errors == 0 ? 0 : 1;
}
