// JIT code regions over time (see jit_code_store.h).
#include "jit_code_store.h"

#include <atomic>

#include <algorithm>
#include <cstring>

#include "ptscope/perf_time.h"

namespace ptscope::symbols {
namespace {

// y0 + (x - x0) * slope, where slope = rise / run (negated when `falls`), clamped to
// [0, 2^64 - 1] and exact for any values: |x - x0| and rise are below 2^64, so their product
// fits 128 unsigned bits (in signed 128 bits it overflows on extreme TimeSync pairs).
uint64_t AlongSlope(uint64_t x, uint64_t x0, uint64_t y0, uint64_t rise, bool falls, uint64_t run) {
  using U128 = unsigned __int128;
  const bool before = x < x0;
  const U128 step = static_cast<U128>(before ? x0 - x : x - x0) * rise / run;
  if (before != falls) return step >= y0 ? 0 : y0 - static_cast<uint64_t>(step);
  return step >= UINT64_MAX - y0 ? UINT64_MAX : y0 + static_cast<uint64_t>(step);
}

// The line through (x0, y0) and (x1, y1) at x.
uint64_t Interpolate(uint64_t x, uint64_t x0, uint64_t y0, uint64_t x1, uint64_t y1) {
  if (x1 == x0) return y0;
  const bool run_back = x1 < x0, y_falls = y1 < y0;
  return AlongSlope(x, x0, y0, y_falls ? y0 - y1 : y1 - y0, y_falls != run_back,
                    run_back ? x0 - x1 : x1 - x0);
}

}  // namespace

void JitTimeMap::SetConversion(uint16_t shift, uint32_t mult, uint64_t zero) {
  shift_ = shift;
  mult_ = mult;
  zero_ = zero;
  identity_ = mult == 0 || shift > 63;
}

void JitTimeMap::AddPair(uint64_t tsc, uint64_t monotonic_ns) {
  auto pair = std::make_pair(monotonic_ns, tsc);
  by_monotonic_.insert(std::upper_bound(by_monotonic_.begin(), by_monotonic_.end(), pair), pair);
}

uint64_t JitTimeMap::TscToNs(uint64_t tsc) const {
  return identity_ ? tsc : perf::PerfTime{shift_, mult_, zero_}.TscToNs(tsc);
}

uint64_t JitTimeMap::MonotonicToTsc(uint64_t mono) const {
  const auto& p = by_monotonic_;
  if (p.empty()) return mono;  // no pairs: assume the trace clock is CLOCK_MONOTONIC
  if (p.size() == 1) {
    // One pair: the TSC rate is the inverse of the conversion (tsc per ns = 2^shift / mult),
    // measured over 1 ms.
    constexpr uint64_t kMs = 1000000;
    const uint64_t ticks = identity_ ? kMs : perf::PerfTime{shift_, mult_, 0}.NsToTsc(kMs);
    return AlongSlope(mono, p[0].first, p[0].second, ticks, false, kMs);
  }
  size_t i = static_cast<size_t>(
      std::upper_bound(p.begin(), p.end(), std::make_pair(mono, UINT64_MAX)) - p.begin());
  size_t lo = i == 0 ? 0 : std::min(i - 1, p.size() - 2);  // segment [lo, lo+1], or nearest end
  return Interpolate(mono, p[lo].first, p[lo].second, p[lo + 1].first, p[lo + 1].second);
}

JitTimeMap JitTimeMap::FromArchive(const format::Archive& archive) {
  JitTimeMap map;
  if (archive.time) {
    map.SetConversion(archive.time->perf.shift, archive.time->perf.mult, archive.time->perf.zero);
  }
  for (const format::TimeSyncChunk& sync : archive.time_syncs) {
    if (sync.clock_id != 1) continue;  // only CLOCK_MONOTONIC pairs place jitdump times
    for (const auto& [tsc, ns] : sync.tsc_and_clock_ns) map.AddPair(tsc, ns);
  }
  return map;
}

std::vector<size_t> JitCodeStore::Holding(const PidRegions& pid_regions, uint64_t address) const {
  std::vector<size_t> found;
  auto it = pid_regions.by_start.upper_bound(address);
  while (it != pid_regions.by_start.begin()) {
    --it;
    if (address - it->first >= pid_regions.max_size) break;
    const JitRegion& region = pid_regions.regions[it->second];
    if (address < region.end) found.push_back(it->second);
  }
  return found;
}

void JitCodeStore::Insert(PidRegions& pid_regions, JitRegion region) {
  static std::atomic<uint64_t> next_version{1};
  region.version = next_version.fetch_add(1, std::memory_order_relaxed);
  // A new region ends every older region it overlaps that is still live at its load time.
  for (JitRegion& old : pid_regions.regions) {
    if (old.start < region.end && region.start < old.end && old.valid_until > region.valid_from &&
        old.valid_from <= region.valid_from) {
      old.valid_until = region.valid_from;
    }
  }
  pid_regions.max_size = std::max(pid_regions.max_size, region.end - region.start);
  pid_regions.by_start.emplace(region.start, pid_regions.regions.size());
  pid_regions.regions.push_back(std::move(region));
}

void JitCodeStore::AddJitdump(uint32_t pid, const JitDump& dump, const JitTimeMap& time) {
  PidRegions& pid_regions = regions_[pid];
  for (const JitCodeRecord& record : dump.records) {
    if (record.code_size == 0 || record.code_addr + record.code_size < record.code_addr) continue;
    uint64_t at = dump.arch_timestamp ? time.TscToNs(record.timestamp)
                                      : time.MonotonicToNs(record.timestamp);
    JitRegion region;
    region.start = record.code_addr;
    region.end = record.code_addr + record.code_size;
    region.valid_from = at;
    if (record.kind == JitCodeRecord::Kind::kLoad) {
      region.name = record.name;
      region.code = std::make_shared<const std::vector<uint8_t>>(record.code);
      region.lines = std::make_shared<const std::vector<JitLineEntry>>(record.lines);
    } else {
      const JitRegion* moved = Lookup(pid, record.old_code_addr, at);
      if (moved == nullptr || moved->start != record.old_code_addr) continue;
      region.name = moved->name;
      region.code = moved->code;
      region.lines = moved->lines;
      region.line_delta = moved->line_delta + (record.code_addr - moved->start);
      region.end = record.code_addr + (moved->end - moved->start);
      // The old copy stops being code at the move.
      for (size_t index : Holding(pid_regions, record.old_code_addr)) {
        JitRegion& old = pid_regions.regions[index];
        if (old.start == record.old_code_addr && old.valid_from <= at && old.valid_until > at)
          old.valid_until = at;
      }
    }
    Insert(pid_regions, std::move(region));
  }
  if (pid_regions.regions.empty()) regions_.erase(pid);
}

void JitCodeStore::AddPerfMap(uint32_t pid, const PerfMap& map) {
  auto& by_start = perf_maps_[pid];
  for (const PerfMapEntry& entry : map.entries) by_start[entry.start] = entry;
  if (by_start.empty()) perf_maps_.erase(pid);
}

const JitRegion* JitCodeStore::Lookup(uint32_t pid, uint64_t address, uint64_t time_ns) const {
  auto it = regions_.find(pid);
  if (it == regions_.end()) return nullptr;
  const JitRegion* best = nullptr;
  uint64_t best_distance = UINT64_MAX;
  for (size_t index : Holding(it->second, address)) {
    const JitRegion& region = it->second.regions[index];
    if (region.valid_until <= region.valid_from) continue;  // replaced at the instant it loaded
    uint64_t distance = 0;
    if (time_ns < region.valid_from) distance = region.valid_from - time_ns;
    else if (time_ns >= region.valid_until) distance = time_ns - region.valid_until + 1;
    // Ties (same distance) go to the later load: it replaced the earlier one.
    if (distance < best_distance || (distance == best_distance && best != nullptr &&
                                     region.valid_from >= best->valid_from)) {
      best = &region;
      best_distance = distance;
    }
  }
  return best;
}

size_t JitCodeStore::ReadCode(uint32_t pid, uint64_t address, uint64_t time_ns, uint8_t* buffer,
                              size_t size) const {
  const JitRegion* region = Lookup(pid, address, time_ns);
  if (region == nullptr || !region->code) return 0;
  uint64_t offset = address - region->start;
  if (offset >= region->code->size()) return 0;
  size_t count = static_cast<size_t>(std::min<uint64_t>(size, region->code->size() - offset));
  std::memcpy(buffer, region->code->data() + offset, count);
  return count;
}

uint64_t JitCodeStore::CodeVersion(uint32_t pid, uint64_t address, uint64_t time_ns) const {
  const JitRegion* region = Lookup(pid, address, time_ns);
  if (region == nullptr || !region->code || address - region->start >= region->code->size()) {
    return 0;
  }
  return region->version;
}

std::optional<JitName> JitCodeStore::Name(uint32_t pid, uint64_t address, uint64_t time_ns) const {
  if (const JitRegion* region = Lookup(pid, address, time_ns)) {
    JitName name{region->name, region->start, {}, 0, true};
    // The line entry with the highest address <= the (pre-move) address.
    const uint64_t loaded_address = address - region->line_delta;
    const JitLineEntry* best = nullptr;
    for (const JitLineEntry& entry : *region->lines) {
      if (entry.address <= loaded_address && (best == nullptr || entry.address >= best->address))
        best = &entry;
    }
    if (best != nullptr) {
      name.file = best->file;
      name.line = best->line > 0 ? static_cast<uint32_t>(best->line) : 0;
    }
    return name;
  }
  auto map = perf_maps_.find(pid);
  if (map == perf_maps_.end()) return std::nullopt;
  auto it = map->second.upper_bound(address);
  if (it == map->second.begin()) return std::nullopt;
  --it;
  if (address - it->second.start >= it->second.size) return std::nullopt;
  return JitName{it->second.name, it->second.start, {}, 0, false};
}

JitCodeStore JitCodeStore::FromArchive(const format::Archive& archive,
                                       std::vector<std::string>& notes) {
  JitCodeStore store;
  JitTimeMap time = JitTimeMap::FromArchive(archive);
  for (size_t i = 0; i < archive.blobs.size(); ++i) {
    const format::BlobChunk& blob = archive.blobs[i];
    if (blob.kind != format::BlobKind::kJitdump && blob.kind != format::BlobKind::kPerfMap) continue;
    // One blob's bytes at a time (the archive may have been read without them).
    Result<std::vector<uint8_t>> data = format::LoadBlobData(archive, i);
    if (!data) {
      notes.push_back(blob.name + " not used: " + data.error().message);
      continue;
    }
    if (blob.kind == format::BlobKind::kJitdump) {
      Result<JitDump> dump = ParseJitdump(data->data(), data->size(), blob.name);
      if (!dump) {
        notes.push_back("jitdump not used: " + dump.error().message);
        continue;
      }
      if (!dump->damage.empty()) notes.push_back("jitdump read up to damage: " + dump->damage);
      if (!dump->arch_timestamp && !time.has_pairs()) {
        notes.push_back(blob.name + ": CLOCK_MONOTONIC jitdump but the archive has no time sync "
                        "pairs: JIT code times are approximate");
      }
      store.AddJitdump(blob.pid != 0 ? blob.pid : dump->pid, *dump, time);
    } else {
      std::string_view text(reinterpret_cast<const char*>(data->data()), data->size());
      PerfMap map = ParsePerfMap(text, blob.name);
      if (map.bad_lines != 0) {
        notes.push_back(map.first_bad + " (" + std::to_string(map.bad_lines) +
                        " malformed lines skipped)");
      }
      store.AddPerfMap(blob.pid, map);
    }
  }
  return store;
}

}  // namespace ptscope::symbols
