#include "pt_session.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <ctime>
#include <set>

#include "elf_file.h"
#include "perf_event.h"
#include "pt_archive_out.h"
#include "pt_aux_ring.h"
#include "pt_filter.h"
#include "pt_privileges.h"
#include "pt_target.h"
#include "vdso.h"

namespace ptscope::record {
namespace {

constexpr uint32_t kSidebandAttrId = 1;
constexpr uint64_t kSidebandRingPages = 128;
constexpr uint64_t kPtRingPages = 16;
constexpr size_t kSidebandFlushBytes = 256 * 1024;
constexpr const char* kToolVersion = "0.1.0";

volatile sig_atomic_t g_interrupt = 0;
volatile sig_atomic_t g_terminate = 0;
volatile sig_atomic_t g_usr2 = 0;

extern "C" void HandleSignal(int sig) {
  if (sig == SIGINT) g_interrupt = 1;
  if (sig == SIGTERM) g_terminate = 1;
  if (sig == SIGUSR2) g_usr2 = 1;
}
extern "C" void HandleChild(int) {}  // only to interrupt ppoll

uint64_t NowNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct SidebandRing {
  PerfEvent event;
  int cpu = -1;
  std::vector<uint8_t> pending;
};

struct PtStream {
  PerfEvent event;
  int cpu = -1;
  uint32_t pid = 0, tid = 0;
  uint32_t stream_id = 0;
  AuxStreamReader full;
  AuxSnapshotReader snapshot;
  std::vector<uint8_t> records;  // its own data ring: AUX, ITRACE_START, LOST
};

class Session {
 public:
  Session(const RecordOptions& o, const HostFacts& f,
          const std::function<void(const std::string&)>& note)
      : opts_(o), facts_(f), note_(note),
        policy_(!o.full && !o.sideband_only, o.multi_snapshot) {}
  Result<RecordSummary> Run();

 private:
  Status Setup();
  Status OpenSideband(const std::vector<int>& tids, const std::vector<int>& cpus);
  Status OpenPt(const std::vector<int>& tids, const std::vector<int>& cpus);
  Status OpenTrigger(const std::vector<int>& tids);
  Status SynthesizeAndVdso();
  Status Loop();
  Status Act(Stimulus stimulus);
  Status Snapshot(bool resume);
  Status DrainSideband(bool force_flush);
  Status FlushSideband(std::vector<uint8_t>* records, int cpu);
  Status DrainPtFull();
  Status DrainPtRecords(PtStream& stream);
  Status WritePiece(const PtStream& stream, const AuxPiece& piece, uint32_t snapshot_index);
  bool TriggerHit();
  Status Finish();
  Status Marker(format::MarkerKind kind, const std::string& text, uint64_t value = 0);
  format::MetadataChunk StartMetadata() const;

  const RecordOptions& opts_;
  const HostFacts& facts_;
  const std::function<void(const std::string&)>& note_;
  std::unique_ptr<format::ArchiveWriter> writer_;
  Target target_;
  std::vector<SidebandRing> sideband_;
  std::vector<PerfEvent> redirected_;
  std::vector<PtStream> pt_;
  std::vector<PerfEvent> breakpoints_;
  std::vector<uint64_t> ids_;
  PtConfig pt_config_;
  TriggerPolicy policy_;
  ModuleCollector modules_;
  BuildIdCache build_ids_;
  PerfClock clock_;
  RecordSummary summary_;
  uint32_t snapshot_index_ = 0;
  uint64_t start_realtime_ns_ = 0;
  std::string trigger_where_;
  uint64_t trigger_address_ = 0;
  bool stop_ = false;
  std::set<int> quiet_fds_;
  sigset_t run_mask_{};
};

format::MetadataChunk Session::StartMetadata() const {
  format::MetadataChunk m;
  m.entries = HostMetadata(facts_, kToolVersion);
  m.entries.emplace_back("command", opts_.command_line);
  m.entries.emplace_back("capture.emulated", "0");
  m.entries.emplace_back("capture.mode", opts_.sideband_only ? "sideband-only"
                                         : opts_.full        ? "full"
                                                             : "snapshot");
  m.entries.emplace_back("capture.start_realtime_ns", std::to_string(start_realtime_ns_));
  if (!opts_.sideband_only) {
    for (auto& kv : PtConfigMetadata(pt_config_, EncodePtConfig(pt_config_))) m.entries.push_back(kv);
    m.entries.emplace_back("pt.filters", opts_.filter);
  }
  for (auto& kv : clock_.Metadata()) m.entries.push_back(kv);
  return m;
}

Status Session::Setup() {
  format::WriterOptions wo;
  wo.sync_each_chunk = false;
  wo.features = (opts_.sideband_only || opts_.full) ? uint64_t{0} : uint64_t{format::kFeatureSnapshot};
  if (opts_.mode == RecordOptions::Mode::kAllCpus) wo.features |= format::kFeaturePerCpu;
  if (opts_.embed_binaries) wo.features |= format::kFeatureEmbeddedBinaries;
  PTSCOPE_ASSIGN_OR_RETURN(writer_, format::ArchiveWriter::Create(opts_.output, wo));
  start_realtime_ns_ = NowNs(CLOCK_REALTIME);

  std::vector<int> tids;
  if (opts_.mode == RecordOptions::Mode::kRun) {
    sigset_t child_mask;
    sigemptyset(&child_mask);
    PTSCOPE_ASSIGN_OR_RETURN(target_, Target::Launch(opts_.argv, child_mask));
    tids = target_.pids();
  } else if (opts_.mode == RecordOptions::Mode::kAttach) {
    PTSCOPE_ASSIGN_OR_RETURN(target_, Target::Attach(opts_.pids));
    for (int pid : opts_.pids) {
      PTSCOPE_ASSIGN_OR_RETURN(std::vector<int> threads, ListThreads(pid));
      tids.insert(tids.end(), threads.begin(), threads.end());
    }
  }
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<int> cpus, OnlineCpus());
  PTSCOPE_TRY(OpenSideband(tids, cpus));
  if (!opts_.sideband_only) PTSCOPE_TRY(OpenPt(tids, cpus));
  if (opts_.trigger) {
    if (target_.pids().empty())
      return MakeError(Errc::kInvalidArgument, "--trigger needs a target: -- PROGRAM or -p PID");
    PTSCOPE_ASSIGN_OR_RETURN(std::vector<int> first_tids, ListThreads(target_.pids().front()));
    PTSCOPE_TRY(OpenTrigger(first_tids));
  }
  clock_ = ReadPerfClock(*sideband_.front().event.page());
  PTSCOPE_TRY(writer_->Write(StartMetadata()));
  format::SidebandAttrChunk attr;
  attr.attr_id = kSidebandAttrId;
  attr.sample_type = kSidebandSampleTypeBits;
  attr.sample_id_all = true;
  attr.ids = ids_;
  perf_event_attr raw = BuildSidebandAttr({});
  const auto* raw_bytes = reinterpret_cast<const uint8_t*>(&raw);
  attr.raw_attr.assign(raw_bytes, raw_bytes + sizeof raw);
  PTSCOPE_TRY(writer_->Write(attr));
  for (SidebandRing& ring : sideband_) PTSCOPE_TRY(ring.event.Enable());
  for (PerfEvent& e : redirected_) PTSCOPE_TRY(e.Enable());
  for (PtStream& s : pt_) PTSCOPE_TRY(s.event.Enable());
  for (PerfEvent& bp : breakpoints_) PTSCOPE_TRY(bp.Enable());
  PTSCOPE_TRY(SynthesizeAndVdso());
  PTSCOPE_TRY(Marker(format::MarkerKind::kCaptureStart, opts_.command_line));
  PTSCOPE_TRY(target_.Resume());
  return DropPrivileges();
}

Status Session::OpenSideband(const std::vector<int>& tids, const std::vector<int>& cpus) {
  bool all = opts_.mode == RecordOptions::Mode::kAllCpus;
  SidebandAttrOptions so;
  so.inherit = !all;
  so.kernel = opts_.pt.kernel;
  perf_event_attr attr = BuildSidebandAttr(so);
  std::vector<int> pids = all ? std::vector<int>{-1} : tids;
  for (int cpu : cpus) {
    for (size_t i = 0; i < pids.size(); ++i) {
      std::string what = "sideband dummy event on cpu " + std::to_string(cpu) +
                         (pids[i] < 0 ? "" : " for tid " + std::to_string(pids[i]));
      PTSCOPE_ASSIGN_OR_RETURN(PerfEvent event, PerfEvent::Open(attr, pids[i], cpu, what));
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

Status Session::OpenPt(const std::vector<int>& tids, const std::vector<int>& cpus) {
  PTSCOPE_ASSIGN_OR_RETURN(pt_config_, ResolvePtConfig(opts_.pt, facts_.pt.caps));
  for (const std::string& w : pt_config_.warnings) {
    summary_.warnings.push_back(w);
    note_("warning: " + w);
  }
  bool all = opts_.mode == RecordOptions::Mode::kAllCpus;
  PtAttrRequest request{facts_.pt.type, false, !opts_.full, opts_.aux_bytes};
  perf_event_attr attr = BuildPtAttr(pt_config_, request);
  std::string filter;
  if (!opts_.filter.empty()) {
    PTSCOPE_ASSIGN_OR_RETURN(filter, ResolvePtFilter(opts_.filter));
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
    PTSCOPE_ASSIGN_OR_RETURN(stream.event, PerfEvent::Open(attr, tid, cpu, what));
    PTSCOPE_TRY(stream.event.MapRing(kPtRingPages));
    PTSCOPE_TRY(stream.event.MapAux(opts_.aux_bytes, /*writable=*/opts_.full));
    if (!filter.empty() && ioctl(stream.event.fd(), PERF_EVENT_IOC_SET_FILTER, filter.c_str()) != 0)
      return MakeError(Errc::kInvalidArgument, "--filter '" + filter + "' was refused by the "
                                               "kernel: " + std::strerror(errno) +
                                               " (check caps/ip_filtering and num_address_ranges)");
    PTSCOPE_ASSIGN_OR_RETURN(uint64_t id, stream.event.Id());
    ids_.push_back(id);
    stream.cpu = cpu;
    stream.tid = tid < 0 ? 0 : static_cast<uint32_t>(tid);
    stream.pid = target_.pids().empty() ? 0 : static_cast<uint32_t>(target_.pids().front());
    stream.stream_id = static_cast<uint32_t>(pt_.size());
    pt_.push_back(std::move(stream));
  }
  return Ok();
}

Status Session::OpenTrigger(const std::vector<int>& tids) {
  PTSCOPE_ASSIGN_OR_RETURN(std::string exe, target_.ExePath());
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<MapEntry> maps, ReadProcMaps(target_.pids().front()));
  PTSCOPE_ASSIGN_OR_RETURN(ResolvedTrigger resolved, ResolveTrigger(*opts_.trigger, exe, maps));
  trigger_where_ = resolved.where;
  trigger_address_ = resolved.address;
  perf_event_attr attr = BuildBreakpointAttr(resolved.address);
  for (int tid : tids) {
    PTSCOPE_ASSIGN_OR_RETURN(PerfEvent bp, PerfEvent::Open(attr, tid, -1,
        "execute breakpoint at " + resolved.where + " for tid " + std::to_string(tid)));
    PTSCOPE_TRY(bp.MapRing(1));
    breakpoints_.push_back(std::move(bp));
  }
  note_("trigger: " + resolved.where);
  return Ok();
}

Status Session::SynthesizeAndVdso() {
  bool all = opts_.mode == RecordOptions::Mode::kAllCpus;
  std::vector<int> pids = all ? ListProcesses() : target_.pids();
  std::vector<uint8_t> records;
  std::vector<uint8_t> vdso_id;
  auto own_maps = ReadProcMaps(0);
  if (own_maps) {
    if (auto own_vdso = ReadVdso(0, *own_maps)) {
      if (auto elf = ElfFile::FromBytes(own_vdso->bytes, "vdso64")) vdso_id = elf->build_id();
    }
  }
  for (int pid : pids) {
    SynthesisContext context{0, 0, ids_.front(), target_.launched(), vdso_id};
    Status synthesized = SynthesizeProcess(pid, context, &build_ids_, &records);
    if (all) continue;  // processes come and go; one vdso (our own, below) serves them all
    PTSCOPE_TRY(synthesized);
    PTSCOPE_ASSIGN_OR_RETURN(std::vector<MapEntry> maps, ReadProcMaps(pid));
    auto vdso = ReadVdso(pid, maps);
    if (!vdso) {
      summary_.warnings.push_back(vdso.error().message);
      continue;
    }
    format::BlobChunk blob;
    blob.kind = format::BlobKind::kVdso;
    blob.name = "vdso64";
    blob.pid = static_cast<uint32_t>(pid);
    blob.vaddr = vdso->vaddr;
    blob.build_id = vdso_id;
    blob.data = std::move(vdso->bytes);
    PTSCOPE_TRY(writer_->Write(blob));
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
      PTSCOPE_TRY(writer_->Write(blob));
    }
  }
  return FlushSideband(&records, -1);
}

Status Session::FlushSideband(std::vector<uint8_t>* records, int cpu) {
  if (records->empty()) return Ok();
  modules_.Scan(*records);
  summary_.sideband_bytes += records->size();
  format::SidebandChunk chunk;
  chunk.attr_id = kSidebandAttrId;
  chunk.cpu = cpu;
  chunk.records = std::move(*records);
  records->clear();
  return writer_->Write(chunk);
}

Status Session::DrainSideband(bool force_flush) {
  for (SidebandRing& ring : sideband_) {
    DrainDataRing(ring.event.data_ring(), &ring.pending);
    if (force_flush || ring.pending.size() >= kSidebandFlushBytes)
      PTSCOPE_TRY(FlushSideband(&ring.pending, ring.cpu));
  }
  return Ok();
}

Status Session::DrainPtRecords(PtStream& stream) {
  std::vector<uint8_t> records;
  DrainDataRing(stream.event.data_ring(), &records);
  perf::RecordIterator it(records, SidebandLayout());
  while (auto next = it.Next()) {
    if (!*next) break;
    if (const auto* aux = std::get_if<perf::AuxRecord>(&next->value().body)) {
      if (aux->flags & perf::kAuxFlagTruncated) stream.full.NoteTruncated();
    }
  }
  return FlushSideband(&records, stream.cpu);
}

Status Session::WritePiece(const PtStream& stream, const AuxPiece& piece, uint32_t snapshot_index) {
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
  summary_.pt_bytes += piece.data.size();
  return writer_->Write(chunk);
}

Status Session::DrainPtFull() {
  for (PtStream& stream : pt_) {
    PTSCOPE_TRY(DrainPtRecords(stream));
    AuxRingView view{stream.event.page(), stream.event.aux(), stream.event.aux_size()};
    if (auto piece = stream.full.Read(view)) PTSCOPE_TRY(WritePiece(stream, *piece, 0));
  }
  return Ok();
}

Status Session::Snapshot(bool resume) {
  for (PtStream& stream : pt_) PTSCOPE_TRY(stream.event.Disable());
  for (PtStream& stream : pt_) {
    PTSCOPE_TRY(DrainPtRecords(stream));
    AuxRingView view{stream.event.page(), stream.event.aux(), stream.event.aux_size()};
    if (auto piece = stream.snapshot.Take(view)) PTSCOPE_TRY(WritePiece(stream, *piece, snapshot_index_));
  }
  ++snapshot_index_;
  ++summary_.snapshots;
  if (resume)
    for (PtStream& stream : pt_) PTSCOPE_TRY(stream.event.Enable());
  return Ok();
}

Status Session::Marker(format::MarkerKind kind, const std::string& text, uint64_t value) {
  format::MarkerChunk marker;
  marker.kind = kind;
  marker.tsc = __rdtsc();
  marker.value = value;
  marker.text = text;
  if (!target_.pids().empty()) marker.pid = static_cast<uint32_t>(target_.pids().front());
  return writer_->Write(marker);
}

Status Session::Act(Stimulus stimulus) {
  TriggerAction action = policy_.On(stimulus);
  std::string text = StimulusName(stimulus);
  if (stimulus == Stimulus::kTriggerHit) text += ": " + trigger_where_;
  PTSCOPE_TRY(Marker(format::MarkerKind::kTrigger, text,
                     stimulus == Stimulus::kTriggerHit ? trigger_address_ : 0));
  if (action.snapshot && !pt_.empty()) PTSCOPE_TRY(Snapshot(!action.stop));
  if (action.stop) {
    stop_ = true;
    summary_.reason = action.reason;
  }
  return Ok();
}

bool Session::TriggerHit() {
  bool hit = false;
  for (PerfEvent& bp : breakpoints_) {
    std::vector<uint8_t> samples;
    DrainDataRing(bp.data_ring(), &samples);
    hit |= !samples.empty();
  }
  return hit;
}

Status Session::Loop() {
  std::optional<uint64_t> deadline;
  if (opts_.duration_s)
    deadline = NowNs(CLOCK_MONOTONIC) + static_cast<uint64_t>(std::llround(*opts_.duration_s * 1e9));
  bool all = opts_.mode == RecordOptions::Mode::kAllCpus;
  while (!stop_) {
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
    for (int fd : target_.exit_fds()) wait_on(fd);
    timespec timeout{0, 100 * 1000 * 1000};
    ppoll(fds.data(), fds.size(), &timeout, &run_mask_);
    for (size_t i = 0; i < fds.size(); ++i) {
      bool gone = (fds[i].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0 ||
                  (i >= first_exit_fd && fds[i].revents != 0);
      if (gone) quiet_fds_.insert(fds[i].fd);
    }
    if (g_interrupt || g_terminate) {
      Stimulus s = g_interrupt ? Stimulus::kInterrupt : Stimulus::kTerminate;
      g_interrupt = 0;
      g_terminate = 0;
      PTSCOPE_TRY(Act(s));
      continue;
    }
    if (g_usr2) {
      g_usr2 = 0;
      PTSCOPE_TRY(Act(Stimulus::kUsr2));
    }
    PTSCOPE_TRY(DrainSideband(false));
    if (opts_.full) PTSCOPE_TRY(DrainPtFull());
    if (TriggerHit()) PTSCOPE_TRY(Act(Stimulus::kTriggerHit));
    if (!stop_ && !all && target_.Exited()) PTSCOPE_TRY(Act(Stimulus::kTargetExit));
    if (!stop_ && deadline && NowNs(CLOCK_MONOTONIC) >= *deadline)
      PTSCOPE_TRY(Act(Stimulus::kDuration));
  }
  return Ok();
}

Status Session::Finish() {
  if (opts_.full) PTSCOPE_TRY(DrainPtFull());
  PTSCOPE_TRY(DrainSideband(true));
  // JIT code descriptions (jitdump, perf map), complete as of now: they name and hold JIT code.
  for (const format::BlobChunk& blob : CaptureJitFiles(modules_, &summary_.warnings)) {
    PTSCOPE_TRY(writer_->Write(blob));
  }
  std::vector<format::ModuleChunk> modules = modules_.Modules(&build_ids_);
  for (format::ModuleChunk& module : modules) {
    if (opts_.embed_binaries) {
      auto blob = EmbedModule(module);
      if (blob) {
        PTSCOPE_TRY(writer_->Write(*blob));
        module.embedded = true;
      } else {
        summary_.warnings.push_back(blob.error().message);
      }
    }
    PTSCOPE_TRY(writer_->Write(module));
  }
  summary_.modules = static_cast<uint32_t>(modules.size());
  format::MetadataChunk end;
  end.entries = {{"trigger.reason", summary_.reason},
                 {"capture.stop_realtime_ns", std::to_string(NowNs(CLOCK_REALTIME))}};
  // The kernel fills the time fields only once the event has been scheduled in; re-read them.
  for (const SidebandRing& ring : sideband_) {
    PerfClock clock = ReadPerfClock(*ring.event.page());
    if (clock.time_mult != 0) {
      clock_ = clock;
      break;
    }
  }
  for (auto& kv : clock_.Metadata()) end.entries.push_back(kv);
  PTSCOPE_TRY(writer_->Write(end));
  PTSCOPE_TRY(Marker(format::MarkerKind::kCaptureStop, summary_.reason));
  summary_.target_wait_status = target_.wait_status();
  PTSCOPE_TRY(writer_->Close());
  summary_.archive_bytes = writer_->bytes_written();
  return Ok();
}

Result<RecordSummary> Session::Run() {
  // Signals are blocked except while waiting in ppoll, so a snapshot request is never lost
  // between a check and the wait. The child gets the original mask back before exec.
  sigset_t blocked;
  sigemptyset(&blocked);
  for (int sig : {SIGINT, SIGTERM, SIGUSR2, SIGCHLD}) sigaddset(&blocked, sig);
  sigprocmask(SIG_BLOCK, &blocked, &run_mask_);
  for (int sig : {SIGINT, SIGTERM, SIGUSR2}) sigdelset(&run_mask_, sig);
  sigdelset(&run_mask_, SIGCHLD);
  struct sigaction sa {};
  sa.sa_handler = HandleSignal;
  for (int sig : {SIGINT, SIGTERM, SIGUSR2}) sigaction(sig, &sa, nullptr);
  sa.sa_handler = HandleChild;
  sigaction(SIGCHLD, &sa, nullptr);
  if (Status setup = Setup(); !setup) {
    // Nothing was recorded: do not leave a half-written archive behind.
    if (writer_) {
      writer_.reset();
      unlink(opts_.output.c_str());
    }
    return std::move(setup).error();
  }
  PTSCOPE_TRY(Loop());
  PTSCOPE_TRY(Finish());
  return summary_;
}

}  // namespace

Result<RecordSummary> RunRecording(const RecordOptions& options, const HostFacts& facts,
                                   const std::function<void(const std::string&)>& note) {
  if (!options.sideband_only) {
    if (auto missing = NoIntelPtMessage(facts))
      return MakeError(Errc::kUnsupported, *missing);
  }
  RecordOptions effective = options;
  if (effective.aux_bytes == 0) effective.aux_bytes = DefaultAuxBytes(facts);
  Session session(effective, facts, note);
  return session.Run();
}

}  // namespace ptscope::record
