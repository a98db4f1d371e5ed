#include "kernel_source.h"

#include <linux/hw_breakpoint.h>
#include <dirent.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "elf_file.h"
#include "pt_filter.h"
#include "session.h"
#include "vdso.h"

namespace ptscope::record {
namespace {


uint64_t NowNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

// PERF_TYPE_BREAKPOINT / HW_BREAKPOINT_X at `address`, one sample per hit (TID|TIME|IP).
perf_event_attr BuildBreakpointAttr(uint64_t address) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_BREAKPOINT;
  attr.bp_type = HW_BREAKPOINT_X;
  attr.bp_addr = address;
  attr.bp_len = sizeof(long);
  attr.sample_period = 1;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  attr.wakeup_events = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.disabled = 1;
  return attr;
}

FilterLimits FilterLimitsOf(const HostFacts& facts, bool all_cpus) {
  FilterLimits limits;
  limits.cpu_wide = all_cpus;
  auto ranges = facts.pt.caps.find("num_address_ranges");
  if (ranges != facts.pt.caps.end()) {
    uint32_t n = 0;
    auto [ptr, ec] = std::from_chars(ranges->second.data(), ranges->second.data() + ranges->second.size(), n);
    if (ec == std::errc()) limits.max_ranges = n;
  }
  return limits;
}

KernelPtSource::KernelPtSource(PerfKernel& kernel, const HostFacts& facts,
                               const KernelSourceOptions& options,
                               std::function<void(const std::string&)> note)
    : kernel_(kernel), facts_(facts), options_(options), note_(std::move(note)) {
  aux_is_default_ = options_.aux_bytes == 0;
  if (aux_is_default_) options_.aux_bytes = DefaultAuxBytes(facts);
}

KernelPtSource::~KernelPtSource() = default;

uint64_t KernelPtSource::NowTsc() { return __rdtsc(); }

std::vector<std::string> KernelPtSource::TakeWarnings() { return std::exchange(warnings_, {}); }

Result<SourceDescription> KernelPtSource::Open(Target& target, const SourceSettings& settings) {
  if (!options_.sideband_only) {
    if (auto missing = NoIntelPtMessage(facts_)) return MakeError(Errc::kUnsupported, *missing);
  }
  settings_ = settings;
  target_ = &target;
  std::vector<int> tids;
  if (settings.mode == SourceSettings::Mode::kRun) {
    tids = target.pids();
    process_of_[tids.front()] = tids.front();
  } else if (settings.mode == SourceSettings::Mode::kAttach) {
    for (int pid : target.pids()) {
      PTSCOPE_ASSIGN_OR_RETURN(std::vector<int> threads, ListThreads(pid));
      tids.insert(tids.end(), threads.begin(), threads.end());
      for (int tid : threads) process_of_[tid] = pid;  // -p A,B: B's threads are B's
    }
  }
  const std::vector<int>& cpus = facts_.online_cpus;
  if (cpus.empty()) return MakeError(Errc::kIo, "/sys/devices/system/cpu/online: no CPU listed");
  std::vector<int> first_tids;
  if (settings.trigger != nullptr) {
    if (target.pids().empty())
      return MakeError(Errc::kInvalidArgument, "--trigger needs a target: -- PROGRAM or -p PID");
    PTSCOPE_ASSIGN_OR_RETURN(first_tids, ListThreads(target.pids().front()));
  }
  RingCounts counts;
  counts.sideband = cpus.size();
  counts.pt = options_.sideband_only ? 0 : all_cpus() ? cpus.size() : tids.size();
  counts.breakpoints = first_tids.size();
  PTSCOPE_ASSIGN_OR_RETURN(rings_, PlanRings(BudgetOf(facts_), counts, options_.aux_bytes,
                                             aux_is_default_));
  if (rings_.aux_pages * PageSize() != options_.aux_bytes && !options_.sideband_only) {
    note_("AUX area of " + std::to_string(rings_.aux_pages * PageSize() / 1024) +
          " KiB per thread to fit the locked-memory budget (" + BudgetOf(facts_).Describe() +
          "); --snapshot-size sets it");
    options_.aux_bytes = rings_.aux_pages * PageSize();
  }
  const uint64_t sideband_events = cpus.size() * (all_cpus() ? 1 : tids.size());
  PTSCOPE_TRY(EnsureDescriptors(sideband_events + counts.pt + counts.breakpoints,
                                all_cpus() ? 0 : tids.size(), cpus.size()));
  PTSCOPE_TRY(OpenSideband(tids, cpus));
  if (!options_.sideband_only) PTSCOPE_TRY(OpenPt(tids, cpus));
  if (settings.trigger != nullptr) PTSCOPE_TRY(OpenTrigger(first_tids));
  clock_ = ReadPerfClock(*sideband_.front().event.page());

  SourceDescription d;
  d.tool = "pt-record";
  if (options_.sideband_only) d.capture_mode = "sideband-only";
  if (all_cpus()) d.features |= format::kFeaturePerCpu;
  d.metadata = {{"kernel.release", facts_.kernel_release}};
  for (auto& kv : CpuMetadata(facts_.cpu)) d.metadata.push_back(kv);
  for (auto& kv : PtHostMetadata(facts_)) d.metadata.push_back(kv);
  if (!options_.sideband_only) {
    for (auto& kv : PtConfigMetadata(pt_config_, EncodePtConfig(pt_config_))) d.metadata.push_back(kv);
    d.metadata.emplace_back("pt.filters", options_.filter);
  }
  for (auto& kv : clock_.Metadata()) d.metadata.push_back(kv);
  d.sideband_ids = ids_;
  const auto* raw_bytes = reinterpret_cast<const uint8_t*>(&sideband_attr_);
  d.raw_attr.assign(raw_bytes, raw_bytes + sizeof sideband_attr_);
  return d;
}

Status KernelPtSource::Start(CaptureWriter& capture) {
  capture_ = &capture;
  for (SidebandRing& ring : sideband_) PTSCOPE_TRY(ring.event.Enable());
  for (PerfEvent& e : redirected_) PTSCOPE_TRY(e.Enable());
  for (PtStream& s : pt_) PTSCOPE_TRY(s.event.Enable());
  for (PerfEvent& bp : breakpoints_) PTSCOPE_TRY(bp.Enable());
  PTSCOPE_TRY(SynthesizeAndVdso());
  return target_->Resume();
}

// Every event is a descriptor. Like perf (rlimit__increase_nofile()), raise the soft
// RLIMIT_NOFILE to the hard one when the events would not fit; past the hard limit, say so.
Status KernelPtSource::EnsureDescriptors(uint64_t events, uint64_t threads, uint64_t cpus) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return Ok();
  uint64_t open = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (readdir(dir) != nullptr) ++open;
    closedir(dir);
  }
  const uint64_t needed = events + open + 16;  // and a few for the archive, pidfds, ELF reads
  if (limit.rlim_cur != RLIM_INFINITY && needed > limit.rlim_cur) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur != RLIM_INFINITY && needed > limit.rlim_cur) {
    std::string what = threads != 0 ? std::to_string(threads) + " threads on " +
                                           std::to_string(cpus) + " CPUs"
                                     : std::to_string(cpus) + " CPUs";
    return MakeError(Errc::kIo,
                     "pt-record needs about " + std::to_string(events) + " descriptors for " +
                         what + ", and ulimit -n allows " + std::to_string(limit.rlim_cur) +
                         " (hard limit " + std::to_string(limit.rlim_max) +
                         "): raise the hard limit (ulimit -Hn, or LimitNOFILE= in a service) "
                         "or trace fewer threads");
  }
  return Ok();
}

// Opens an event for `tid` (or every task with -1); a thread that exited since it was listed
// (ESRCH, find_lively_task_by_vpid) is noted once and yields std::nullopt.
Result<std::optional<PerfEvent>> KernelPtSource::OpenFor(const perf_event_attr& attr, int tid,
                                                         int cpu, const std::string& what) {
  if (tid >= 0 && vanished_.count(tid) != 0) return std::optional<PerfEvent>();
  int open_errno = 0;
  Result<PerfEvent> opened = PerfEvent::Open(kernel_, attr, tid, cpu, what, &open_errno);
  if (opened) return std::optional<PerfEvent>(std::move(*opened));
  const bool is_target = target_->launched() && tid == target_->pids().front();
  if (open_errno == ESRCH && tid >= 0 && !is_target) {
    vanished_.insert(tid);
    auto owner = process_of_.find(tid);
    note_("thread " + std::to_string(tid) + " of process " +
          std::to_string(owner == process_of_.end() ? tid : owner->second) +
          " exited before it could be traced");
    return std::optional<PerfEvent>();
  }
  return std::move(opened).error();
}

Status KernelPtSource::OpenSideband(const std::vector<int>& tids, const std::vector<int>& cpus) {
  bool all = all_cpus();
  SidebandAttrOptions so;
  so.inherit = !all;
  so.kernel = options_.pt.kernel;
  sideband_attr_ = BuildSidebandAttr(so);
  std::vector<int> pids = all ? std::vector<int>{-1} : tids;
  for (int cpu : cpus) {
    SidebandRing* ring = nullptr;  // the CPU's mapped ring; the other tasks' events write into it
    for (int pid : pids) {
      std::string what = "sideband dummy event on cpu " + std::to_string(cpu) +
                         (pid < 0 ? "" : " for tid " + std::to_string(pid));
      Result<PerfEvent> probe = MakeError(Errc::kInternal, "");
      if (sideband_attr_.build_id && ids_.empty()) {
        int open_errno = 0;
        probe = PerfEvent::Open(kernel_, sideband_attr_, pid, cpu, what, &open_errno);
        if (!probe && open_errno == EINVAL) {
          // perf_copy_attr() refuses flag bits the kernel does not know (__reserved_1), and
          // build_id came with Linux 5.12: as perf does, go on without it.
          sideband_attr_.build_id = 0;
          auto [major, minor] = KernelVersion(facts_.kernel_release);
          note_("this kernel (" + std::to_string(major) + "." + std::to_string(minor) +
                ") does not put build ids in MMAP2 records (Linux 5.12 and later do): build ids "
                "are read from the mapped files while recording");
        }
      }
      std::optional<PerfEvent> event;
      if (probe) {
        event = std::move(*probe);
      } else {
        PTSCOPE_ASSIGN_OR_RETURN(event, OpenFor(sideband_attr_, pid, cpu, what));
        if (!event) continue;
      }
      PTSCOPE_ASSIGN_OR_RETURN(uint64_t id, event->Id());
      ids_.push_back(id);
      if (ring == nullptr) {
        PTSCOPE_TRY(event->MapRing(rings_.sideband_pages));
        sideband_.push_back(SidebandRing{std::move(*event), cpu, {}});
        ring = &sideband_.back();
      } else {
        PTSCOPE_TRY(event->RedirectOutputTo(ring->event));
        redirected_.push_back(std::move(*event));
      }
    }
  }
  if (sideband_.empty()) return MakeError(Errc::kNotFound, "every target thread exited");
  return Ok();
}

Status KernelPtSource::OpenPt(const std::vector<int>& tids, const std::vector<int>& cpus) {
  PTSCOPE_ASSIGN_OR_RETURN(pt_config_, ResolvePtConfig(options_.pt, facts_.pt.caps));
  for (const std::string& w : pt_config_.warnings) {
    warnings_.push_back(w);
    note_("warning: " + w);
  }
  bool all = all_cpus();
  PtAttrRequest request{facts_.pt.type, false, !!settings_.snapshot, options_.aux_bytes};
  perf_event_attr attr = BuildPtAttr(pt_config_, request);
  std::string filter;
  if (!options_.filter.empty()) {
    PTSCOPE_ASSIGN_OR_RETURN(filter, ResolvePtFilter(options_.filter, FilterLimitsOf(facts_, all)));
  }
  std::vector<std::pair<int, int>> targets;  // (pid, cpu)
  if (all) {
    for (int cpu : cpus) targets.emplace_back(-1, cpu);
  } else {
    for (int tid : tids) targets.emplace_back(tid, -1);
  }
  for (auto [tid, cpu] : targets) {
    PtStream stream;
    // perf keeps two PSB periods of the ring's newest data to tell new data from old.
    stream.snapshot = AuxSnapshotReader(
        std::min<uint64_t>(uint64_t{2} << (pt_config_.psb_period + 11), 256 * 1024));
    std::string what = tid < 0 ? "intel_pt on cpu " + std::to_string(cpu)
                               : "intel_pt for tid " + std::to_string(tid);
    PTSCOPE_ASSIGN_OR_RETURN(std::optional<PerfEvent> event, OpenFor(attr, tid, cpu, what));
    if (!event) continue;
    stream.event = std::move(*event);
    PTSCOPE_TRY(stream.event.MapRing(rings_.pt_data_pages));
    PTSCOPE_TRY(stream.event.MapAux(options_.aux_bytes, /*writable=*/!settings_.snapshot));
    if (!filter.empty()) PTSCOPE_TRY(stream.event.SetFilter(filter));
    PTSCOPE_ASSIGN_OR_RETURN(uint64_t id, stream.event.Id());
    ids_.push_back(id);
    stream.cpu = cpu;
    stream.tid = tid < 0 ? 0 : static_cast<uint32_t>(tid);
    stream.pid = tid < 0 ? 0 : static_cast<uint32_t>(process_of_.at(tid));
    stream.stream_id = static_cast<uint32_t>(pt_.size());
    pt_.push_back(std::move(stream));
  }
  return Ok();
}

Status KernelPtSource::OpenTrigger(const std::vector<int>& tids) {
  PTSCOPE_ASSIGN_OR_RETURN(std::string exe, target_->ExePath());
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<MapEntry> maps, ReadProcMaps(target_->pids().front()));
  PTSCOPE_ASSIGN_OR_RETURN(ResolvedTrigger resolved, ResolveTrigger(*settings_.trigger, exe, maps));
  trigger_address_ = resolved.address;
  perf_event_attr attr = BuildBreakpointAttr(resolved.address);
  for (int tid : tids) {
    PTSCOPE_ASSIGN_OR_RETURN(std::optional<PerfEvent> bp, OpenFor(attr, tid, -1,
        "execute breakpoint at " + resolved.where + " for tid " + std::to_string(tid)));
    if (!bp) continue;
    PTSCOPE_TRY(bp->MapRing(rings_.breakpoint_pages));
    breakpoints_.push_back(std::move(*bp));
  }
  note_("trigger: " + resolved.where);
  return Ok();
}

Status KernelPtSource::SynthesizeAndVdso() {
  bool all = all_cpus();
  std::vector<int> pids = all ? ListProcesses() : target_->pids();
  std::vector<uint8_t> records;
  BuildIdCache build_ids;
  std::vector<uint8_t> vdso_id;
  auto own_maps = ReadProcMaps(0);
  if (own_maps) {
    if (auto own_vdso = ReadVdso(0, *own_maps)) {
      if (auto elf = ElfFile::FromBytes(own_vdso->bytes, "vdso64")) vdso_id = elf->build_id();
    }
  }
  for (int pid : pids) {
    SynthesisContext context{0, 0, ids_.front(), target_->launched(), vdso_id};
    Status synthesized = SynthesizeProcess(pid, context, &build_ids, &records);
    if (all) continue;  // processes come and go; one vdso (our own, below) serves them all
    PTSCOPE_TRY(synthesized);
    PTSCOPE_ASSIGN_OR_RETURN(std::vector<MapEntry> maps, ReadProcMaps(pid));
    auto vdso = ReadVdso(pid, maps);
    if (!vdso) {
      warnings_.push_back(vdso.error().message);
      continue;
    }
    format::BlobChunk blob;
    blob.kind = format::BlobKind::kVdso;
    blob.name = "vdso64";
    blob.pid = static_cast<uint32_t>(pid);
    blob.vaddr = vdso->vaddr;
    blob.build_id = vdso_id;
    blob.data = std::move(vdso->bytes);
    PTSCOPE_TRY(capture_->WriteChunk(blob));
  }
  if (all && own_maps) {
    // Every 64-bit process maps the same vdso image; each one's address is in its MMAP2.
    if (auto own_vdso = ReadVdso(0, *own_maps)) {
      format::BlobChunk blob;
      blob.kind = format::BlobKind::kVdso;
      blob.name = "vdso64";
      blob.vaddr = own_vdso->vaddr;
      blob.build_id = vdso_id;
      blob.data = std::move(own_vdso->bytes);
      PTSCOPE_TRY(capture_->WriteChunk(blob));
    }
  }
  return capture_->AddRawRecords(records, -1);
}

// The kernel's sideband records, handed to the archive writer as they come: it writes them
// before any PT chunk (so what maps the code always precedes the PT needing it) and at every
// flush (so a killed recorder keeps them).
Status KernelPtSource::DrainSideband(bool force_flush) {
  for (SidebandRing& ring : sideband_) {
    ring.pending.clear();
    DrainDataRing(ring.event.data_ring(), &ring.pending);
    PTSCOPE_TRY(capture_->AddRawRecords(ring.pending, ring.cpu));
  }
  return force_flush ? capture_->FlushSideband() : Ok();
}

Status KernelPtSource::DrainPtRecords(PtStream& stream) {
  std::vector<uint8_t> records;
  DrainDataRing(stream.event.data_ring(), &records);
  perf::RecordIterator it(records, SidebandLayout());
  while (auto next = it.Next()) {
    if (!*next) break;
    if (const auto* aux = std::get_if<perf::AuxRecord>(&next->value().body)) {
      if (aux->flags & perf::kAuxFlagTruncated) stream.full.NoteTruncated();
    }
  }
  return capture_->AddRawRecords(records, stream.cpu);
}

Status KernelPtSource::WritePiece(const PtStream& stream, const AuxPiece& piece, uint32_t snapshot_index) {
  format::PtDataChunk chunk;
  chunk.stream_id = stream.stream_id;
  chunk.cpu = stream.cpu;
  chunk.pid = stream.pid;
  chunk.tid = stream.tid;
  chunk.stream_offset = piece.stream_offset;
  chunk.reference_tsc = __rdtsc();
  chunk.flags = piece.flags;
  chunk.bytes_lost_before = piece.bytes_lost_before;
  chunk.snapshot_index = snapshot_index;
  chunk.data = piece.data;
  return capture_->WritePt(chunk);
}

Status KernelPtSource::DrainPtFull() {
  PTSCOPE_TRY(DrainSideband(false));  // the mappings of the code in these pieces come first
  for (PtStream& stream : pt_) {
    PTSCOPE_TRY(DrainPtRecords(stream));
    AuxRingView view{stream.event.page(), stream.event.aux(), stream.event.aux_size()};
    const bool truncated = stream.full.truncated_pending();
    if (auto piece = stream.full.Read(view)) {
      PTSCOPE_TRY(WritePiece(stream, *piece, 0));
      // A full buffer stopped the hardware and the kernel disabled the event (TRUNCATED: the
      // piece says data is missing after it); one that had no room when the task came back was
      // disabled without a record (perf_aux_output_begin()). Room was just made: enable again,
      // as perf does. Enabling an enabled event changes nothing (_perf_event_enable()).
      if (truncated || !piece->data.empty()) PTSCOPE_TRY(stream.event.Enable());
    }
  }
  return Ok();
}

Status KernelPtSource::Snapshot(uint32_t index, bool final) {
  if (pt_.empty()) return Ok();
  for (PtStream& stream : pt_) PTSCOPE_TRY(stream.event.Disable());
  PTSCOPE_TRY(DrainSideband(false));  // the mappings of the code in the snapshot come first
  for (PtStream& stream : pt_) {
    PTSCOPE_TRY(DrainPtRecords(stream));
    AuxRingView view{stream.event.page(), stream.event.aux(), stream.event.aux_size()};
    if (auto piece = stream.snapshot.Take(view)) PTSCOPE_TRY(WritePiece(stream, *piece, index));
  }
  if (!final)
    for (PtStream& stream : pt_) PTSCOPE_TRY(stream.event.Enable());
  return Ok();
}

bool KernelPtSource::TriggerHit() {
  bool hit = false;
  for (PerfEvent& bp : breakpoints_) {
    std::vector<uint8_t> samples;
    DrainDataRing(bp.data_ring(), &samples);
    hit |= !samples.empty();
  }
  return hit;
}

Result<SourceEvents> KernelPtSource::Run(uint64_t deadline_ns) {
  // Events of exited tasks report POLLHUP, and a pidfd stays readable after its exit, for
  // ever: drop such fds from the wait set so the loop does not spin (rings are still drained).
  std::vector<pollfd> fds;
  auto wait_on = [&](int fd) {
    if (quiet_fds_.count(fd) == 0) fds.push_back({fd, POLLIN, 0});
  };
  for (SidebandRing& r : sideband_) wait_on(r.event.fd());
  for (PtStream& s : pt_) wait_on(s.event.fd());
  for (PerfEvent& bp : breakpoints_) wait_on(bp.fd());
  size_t first_exit_fd = fds.size();
  for (int fd : target_->exit_fds()) wait_on(fd);
  const uint64_t now = NowNs(CLOCK_MONOTONIC);
  const uint64_t wait_ns = deadline_ns > now ? deadline_ns - now : 0;
  timespec timeout{static_cast<time_t>(wait_ns / 1000000000),
                   static_cast<long>(wait_ns % 1000000000)};
  kernel_.Poll(fds.data(), fds.size(), &timeout, &SessionSignals::WaitMask());
  for (size_t i = 0; i < fds.size(); ++i) {
    bool gone = (fds[i].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0 ||
                (i >= first_exit_fd && fds[i].revents != 0);
    if (gone) quiet_fds_.insert(fds[i].fd);
  }
  SourceEvents events;
  if (SessionSignals::Pending()) return events;
  PTSCOPE_TRY(DrainSideband(false));
  if (!settings_.snapshot) {
    PTSCOPE_TRY(DrainPtFull());
  } else {
    // Every sched-out writes an AUX record into the PT event's own ring (pt_event_stop()): a
    // ring nobody drains fills up and the kernel drops records (rb->lost), ITRACE_START included.
    for (PtStream& stream : pt_) PTSCOPE_TRY(DrainPtRecords(stream));
  }
  if (TriggerHit()) {
    events.trigger_hit = true;
    events.trigger_address = trigger_address_;
  }
  events.target_gone = !all_cpus() && target_->Exited();
  PTSCOPE_TRY(capture_->FlushSideband());  // a killed recorder keeps what came so far
  return events;
}

Status KernelPtSource::Finish() {
  if (!settings_.snapshot) PTSCOPE_TRY(DrainPtFull());
  return DrainSideband(true);
}

MetadataEntries KernelPtSource::EndMetadata() {
  // The kernel fills the time fields only once the event has been scheduled in; re-read them.
  for (const SidebandRing& ring : sideband_) {
    PerfClock clock = ReadPerfClock(*ring.event.page());
    if (clock.time_mult != 0) {
      clock_ = clock;
      break;
    }
  }
  return clock_.Metadata();
}

}  // namespace ptscope::record
