#include "kernel_source.h"

#include <linux/hw_breakpoint.h>
#include <poll.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "elf_file.h"
#include "pt_filter.h"
#include "session.h"
#include "vdso.h"

namespace ptscope::record {
namespace {

constexpr uint64_t kSidebandRingPages = 128;
constexpr uint64_t kPtRingPages = 16;
constexpr size_t kSidebandFlushBytes = 256 * 1024;

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

KernelPtSource::KernelPtSource(PerfKernel& kernel, const HostFacts& facts,
                               const KernelSourceOptions& options,
                               std::function<void(const std::string&)> note)
    : kernel_(kernel), facts_(facts), options_(options), note_(std::move(note)) {
  if (options_.aux_bytes == 0) options_.aux_bytes = DefaultAuxBytes(facts);
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
  } else if (settings.mode == SourceSettings::Mode::kAttach) {
    for (int pid : target.pids()) {
      PTSCOPE_ASSIGN_OR_RETURN(std::vector<int> threads, ListThreads(pid));
      tids.insert(tids.end(), threads.begin(), threads.end());
    }
  }
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<int> cpus, OnlineCpus());
  PTSCOPE_TRY(OpenSideband(tids, cpus));
  if (!options_.sideband_only) PTSCOPE_TRY(OpenPt(tids, cpus));
  if (settings.trigger != nullptr) {
    if (target.pids().empty())
      return MakeError(Errc::kInvalidArgument, "--trigger needs a target: -- PROGRAM or -p PID");
    PTSCOPE_ASSIGN_OR_RETURN(std::vector<int> first_tids, ListThreads(target.pids().front()));
    PTSCOPE_TRY(OpenTrigger(first_tids));
  }
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
  perf_event_attr raw = BuildSidebandAttr({});
  const auto* raw_bytes = reinterpret_cast<const uint8_t*>(&raw);
  d.raw_attr.assign(raw_bytes, raw_bytes + sizeof raw);
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

Status KernelPtSource::OpenSideband(const std::vector<int>& tids, const std::vector<int>& cpus) {
  bool all = all_cpus();
  SidebandAttrOptions so;
  so.inherit = !all;
  so.kernel = options_.pt.kernel;
  perf_event_attr attr = BuildSidebandAttr(so);
  std::vector<int> pids = all ? std::vector<int>{-1} : tids;
  for (int cpu : cpus) {
    for (size_t i = 0; i < pids.size(); ++i) {
      std::string what = "sideband dummy event on cpu " + std::to_string(cpu) +
                         (pids[i] < 0 ? "" : " for tid " + std::to_string(pids[i]));
      PTSCOPE_ASSIGN_OR_RETURN(PerfEvent event, PerfEvent::Open(kernel_, attr, pids[i], cpu, what));
      PTSCOPE_ASSIGN_OR_RETURN(uint64_t id, event.Id());
      ids_.push_back(id);
      if (i == 0) {
        PTSCOPE_TRY(event.MapRing(kSidebandRingPages));
        sideband_.push_back(SidebandRing{std::move(event), cpu, {}});
      } else {
        PTSCOPE_TRY(event.RedirectOutputTo(sideband_.back().event));
        redirected_.push_back(std::move(event));
      }
    }
  }
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
    PTSCOPE_ASSIGN_OR_RETURN(filter, ResolvePtFilter(options_.filter));
  }
  std::vector<std::pair<int, int>> targets;  // (pid, cpu)
  if (all) {
    for (int cpu : cpus) targets.emplace_back(-1, cpu);
  } else {
    for (int tid : tids) targets.emplace_back(tid, -1);
  }
  for (auto [tid, cpu] : targets) {
    PtStream stream;
    std::string what = tid < 0 ? "intel_pt on cpu " + std::to_string(cpu)
                               : "intel_pt for tid " + std::to_string(tid);
    PTSCOPE_ASSIGN_OR_RETURN(stream.event, PerfEvent::Open(kernel_, attr, tid, cpu, what));
    PTSCOPE_TRY(stream.event.MapRing(kPtRingPages));
    PTSCOPE_TRY(stream.event.MapAux(options_.aux_bytes, /*writable=*/!settings_.snapshot));
    if (!filter.empty()) PTSCOPE_TRY(stream.event.SetFilter(filter));
    PTSCOPE_ASSIGN_OR_RETURN(uint64_t id, stream.event.Id());
    ids_.push_back(id);
    stream.cpu = cpu;
    stream.tid = tid < 0 ? 0 : static_cast<uint32_t>(tid);
    stream.pid = target_->pids().empty() ? 0 : static_cast<uint32_t>(target_->pids().front());
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
    PTSCOPE_ASSIGN_OR_RETURN(PerfEvent bp, PerfEvent::Open(kernel_, attr, tid, -1,
        "execute breakpoint at " + resolved.where + " for tid " + std::to_string(tid)));
    PTSCOPE_TRY(bp.MapRing(1));
    breakpoints_.push_back(std::move(bp));
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

Status KernelPtSource::DrainSideband(bool force_flush) {
  for (SidebandRing& ring : sideband_) {
    DrainDataRing(ring.event.data_ring(), &ring.pending);
    if (force_flush || ring.pending.size() >= kSidebandFlushBytes) {
      PTSCOPE_TRY(capture_->AddRawRecords(ring.pending, ring.cpu));
      ring.pending.clear();
    }
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
  for (PtStream& stream : pt_) {
    PTSCOPE_TRY(DrainPtRecords(stream));
    AuxRingView view{stream.event.page(), stream.event.aux(), stream.event.aux_size()};
    if (auto piece = stream.full.Read(view)) PTSCOPE_TRY(WritePiece(stream, *piece, 0));
  }
  return Ok();
}

Status KernelPtSource::Snapshot(uint32_t index, bool final) {
  if (pt_.empty()) return Ok();
  for (PtStream& stream : pt_) PTSCOPE_TRY(stream.event.Disable());
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
  if (!settings_.snapshot) PTSCOPE_TRY(DrainPtFull());
  if (TriggerHit()) {
    events.trigger_hit = true;
    events.trigger_address = trigger_address_;
  }
  events.target_gone = !all_cpus() && target_->Exited();
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
