#include "perf_sideband.h"

#include <sys/mman.h>

#include <cstring>

#include "elf_file.h"
#include "ptscope/perf_time.h"

namespace ptscope::record {

perf_event_attr BuildSidebandAttr(const SidebandAttrOptions& options) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.sample_type = kSidebandSampleType;
  attr.sample_id_all = 1;
  attr.mmap = 1;
  attr.mmap2 = 1;
  attr.build_id = options.build_id ? 1 : 0;
  attr.comm = 1;
  attr.comm_exec = 1;
  attr.task = 1;
  attr.context_switch = options.context_switch ? 1 : 0;
  attr.inherit = options.inherit ? 1 : 0;
  attr.exclude_kernel = options.kernel ? 0 : 1;
  attr.exclude_hv = 1;
  attr.disabled = 1;
  attr.enable_on_exec = options.enable_on_exec ? 1 : 0;
  attr.watermark = 1;
  attr.wakeup_watermark = 4096;
  return attr;
}

uint64_t PerfClock::TscToPerfTime(uint64_t tsc) const {
  return perf::PerfTime{time_shift, time_mult, time_zero}.TscToNs(tsc);
}

std::vector<std::pair<std::string, std::string>> PerfClock::Metadata() const {
  return {{"time.shift", std::to_string(time_shift)},
          {"time.mult", std::to_string(time_mult)},
          {"time.zero", std::to_string(time_zero)},
          {"time.cap_user_time_zero", cap_user_time_zero ? "1" : "0"}};
}

PerfClock ReadPerfClock(const perf_event_mmap_page& page) {
  // The kernel updates these between two increments of `lock` (perf_event_update_userpage()):
  // a read counts only if the count was even and unchanged around it (perf's
  // perf_read_tsc_conversion()). An update that never seems to end leaves the clock unknown.
  for (int attempt = 0; attempt < 10000; ++attempt) {
    const uint32_t seq = __atomic_load_n(&page.lock, __ATOMIC_ACQUIRE);
    PerfClock clock;
    clock.cap_user_time_zero = page.cap_user_time_zero;
    clock.time_shift = page.time_shift;
    clock.time_mult = page.time_mult;
    clock.time_zero = page.time_zero;
    if (__atomic_load_n(&page.lock, __ATOMIC_ACQUIRE) == seq && (seq & 1) == 0) return clock;
  }
  return PerfClock{};
}

const std::vector<uint8_t>& BuildIdCache::Get(const std::string& path, int pid,
                                              const MapEntry* mapping) {
  auto it = ids_.find(path);
  if (it != ids_.end()) return it->second;
  std::vector<uint8_t> id;
  std::string source = path;
  if (mapping != nullptr && mapping->deleted) {
    char range[64];
    std::snprintf(range, sizeof range, "/map_files/%llx-%llx",
                  static_cast<unsigned long long>(mapping->start),
                  static_cast<unsigned long long>(mapping->end));
    source = ProcDir(pid) + range;
  }
  if (auto elf = ElfFile::Open(source)) id = elf->build_id();
  return ids_.emplace(path, std::move(id)).first->second;
}

Result<std::string> ReadComm(int pid, int tid) {
  PTSCOPE_ASSIGN_OR_RETURN(std::string comm,
                           ReadProcFile(ProcDir(pid) + "/task/" + std::to_string(tid) + "/comm"));
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

namespace {

perf::SampleId MakeSampleId(uint32_t pid, uint32_t tid, const SynthesisContext& context) {
  perf::SampleId s;
  s.pid = pid;
  s.tid = tid;
  s.time = context.time;
  s.cpu = context.cpu;
  s.id = context.id;
  return s;
}

perf::Record MmapRecordFor(int pid, const MapEntry& m, const std::vector<uint8_t>& build_id,
                           const SynthesisContext& context) {
  perf::MmapRecord body;
  body.pid = body.tid = static_cast<uint32_t>(pid);
  body.addr = m.start;
  body.len = m.size();
  body.pgoff = m.offset;
  body.maj = m.dev_major;
  body.min = m.dev_minor;
  body.ino = m.inode;
  body.build_id = build_id;
  body.prot = m.prot();
  body.flags = m.shared ? MAP_SHARED : MAP_PRIVATE;
  body.filename = m.deleted ? m.path + " (deleted)" : m.path;  // as the kernel's d_path
  body.is_mmap2 = true;
  perf::Record record;
  record.type = perf::kRecordMmap2;
  record.misc = perf::kMiscUser | (build_id.empty() ? 0 : perf::kMiscMmapBuildId);
  record.body = std::move(body);
  record.sample_id = MakeSampleId(static_cast<uint32_t>(pid), static_cast<uint32_t>(pid), context);
  return record;
}

void Append(const perf::Record& record, std::vector<uint8_t>* out) {
  std::vector<uint8_t> bytes = perf::BuildRecord(record, SidebandLayout());
  out->insert(out->end(), bytes.begin(), bytes.end());
}

}  // namespace

Status SynthesizeProcess(int pid, const SynthesisContext& context, BuildIdCache* build_ids,
                         std::vector<uint8_t>* out) {
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<int> tids, ListThreads(pid));
  for (int tid : tids) {
    auto comm = ReadComm(pid, tid);
    if (!comm) continue;  // the thread exited meanwhile
    perf::Record record;
    record.type = perf::kRecordComm;
    record.misc = context.comm_exec ? perf::kMiscCommExec : 0;
    perf::CommRecord body;
    body.pid = static_cast<uint32_t>(pid);
    body.tid = static_cast<uint32_t>(tid);
    body.comm = *comm;
    body.exec = context.comm_exec;
    record.body = body;
    record.sample_id = MakeSampleId(body.pid, body.tid, context);
    Append(record, out);
  }
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<MapEntry> maps, ReadProcMaps(pid));
  for (const MapEntry& m : maps) {
    if (!m.exec) continue;  // the kernel reports only executable mappings without mmap_data
    if (m.is_vdso()) {
      Append(MmapRecordFor(pid, m, context.vdso_build_id, context), out);
    } else if (m.is_file()) {
      Append(MmapRecordFor(pid, m, build_ids->Get(m.path, pid, &m), context), out);
    }
  }
  return Ok();
}

}  // namespace ptscope::record
