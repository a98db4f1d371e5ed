#include "session.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <memory>

#include "privileges.h"

namespace ptscope::record {
namespace {

volatile sig_atomic_t g_interrupt = 0;
volatile sig_atomic_t g_terminate = 0;
volatile sig_atomic_t g_usr2 = 0;
sigset_t g_wait_mask;
sigset_t g_child_mask;

extern "C" void HandleSessionSignal(int sig) {
  if (sig == SIGINT) g_interrupt = 1;
  if (sig == SIGTERM) g_terminate = 1;
  if (sig == SIGUSR2) g_usr2 = 1;
}
extern "C" void HandleChild(int) {}  // only to interrupt a wait

constexpr int kSessionSignals[] = {SIGINT, SIGTERM, SIGUSR2};
// A source waits at most this long before the session looks at the clock (--duration).
constexpr uint64_t kMaxWaitNs = 100'000'000;

uint64_t NowNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

class Session {
 public:
  Session(const SessionOptions& options, PtSource& source)
      : options_(options), source_(source), policy_(options.snapshot, options.multi_snapshot) {}

  Result<SessionSummary> Run();

 private:
  Status Setup();
  Status CreateArchive(const SourceDescription& description);
  MetadataEntries StartMetadata(const SourceDescription& description) const;
  Status Loop();
  Status Act(Stimulus stimulus, uint64_t trigger_address = 0);
  Status Finish();
  Status Marker(format::MarkerKind kind, const std::string& text, uint64_t value = 0);

  const SessionOptions& options_;
  PtSource& source_;
  TriggerPolicy policy_;
  Target target_;
  std::unique_ptr<CaptureWriter> capture_;
  SessionSummary summary_;
  uint32_t snapshot_index_ = 0;
  uint64_t start_realtime_ns_ = 0;
  bool stop_ = false;
};

MetadataEntries Session::StartMetadata(const SourceDescription& description) const {
  MetadataEntries m = {{"tool", description.tool}, {"tool.version", options_.tool_version}};
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  m.emplace_back("host.name", host);
  m.emplace_back("command", options_.command_line);
  m.emplace_back("capture.emulated",
                 (description.features & format::kFeatureEmulated) != 0 ? "1" : "0");
  m.emplace_back("capture.mode", !description.capture_mode.empty() ? description.capture_mode
                                 : options_.snapshot                ? "snapshot"
                                                                    : "full");
  m.emplace_back("capture.start_realtime_ns", std::to_string(start_realtime_ns_));
  m.insert(m.end(), description.metadata.begin(), description.metadata.end());
  return m;
}

Status Session::CreateArchive(const SourceDescription& description) {
  CaptureOptions capture;
  capture.archive.features = description.features;
  if (options_.snapshot) capture.archive.features |= format::kFeatureSnapshot;
  if (options_.embed_binaries) capture.archive.features |= format::kFeatureEmbeddedBinaries;
  capture.sideband_ids = description.sideband_ids;
  capture.raw_attr = description.raw_attr;
  capture.embed_binaries = options_.embed_binaries;
  {
    // A set-uid recorder creates the archive as the user who ran it: it can write only where
    // the user may, never through a link (OutputFile), and the file belongs to the user.
    AsInvokingUser as_user;
    PTSCOPE_ASSIGN_OR_RETURN(capture_, CaptureWriter::Create(options_.output, capture));
  }
  start_realtime_ns_ = NowNs(CLOCK_REALTIME);
  return capture_->WriteMetadata(StartMetadata(description));
}

Status Session::Setup() {
  if (options_.mode == SourceSettings::Mode::kRun) {
    LaunchOptions launch = source_.launch_options();
    launch.child_sigmask = SessionSignals::ChildMask();
    PTSCOPE_ASSIGN_OR_RETURN(target_, Target::Launch(options_.argv, launch));
  } else if (options_.mode == SourceSettings::Mode::kAttach) {
    PTSCOPE_ASSIGN_OR_RETURN(target_, Target::Attach(options_.pids));
  }
  SourceSettings settings;
  settings.mode = options_.mode;
  settings.snapshot = options_.snapshot;
  settings.trigger = options_.trigger ? &*options_.trigger : nullptr;
  PTSCOPE_ASSIGN_OR_RETURN(SourceDescription description, source_.Open(target_, settings));
  PTSCOPE_TRY(CreateArchive(description));
  if (Status started = source_.Start(*capture_); !started) {
    // Nothing was traced: do not leave an archive that looks like a capture.
    capture_->Discard();
    capture_.reset();
    return started;
  }
  PTSCOPE_TRY(Marker(format::MarkerKind::kCaptureStart, options_.command_line));
  if (options_.drop_privileges) PTSCOPE_TRY(DropPrivileges());
  return Ok();
}

Status Session::Marker(format::MarkerKind kind, const std::string& text, uint64_t value) {
  format::MarkerChunk marker;
  marker.kind = kind;
  marker.tsc = source_.NowTsc();
  marker.value = value;
  marker.text = text;
  if (!target_.pids().empty()) marker.pid = static_cast<uint32_t>(target_.pids().front());
  return capture_->WriteChunk(marker);
}

Status Session::Act(Stimulus stimulus, uint64_t trigger_address) {
  TriggerAction action = policy_.On(stimulus);
  if (stimulus == Stimulus::kTriggerHit) {
    // tid 0: the trigger concerns every thread's trace (decoders show it on each).
    PTSCOPE_TRY(Marker(format::MarkerKind::kTrigger, options_.trigger->text, trigger_address));
  }
  if (action.snapshot) {
    PTSCOPE_TRY(source_.Snapshot(snapshot_index_++, action.stop));
    ++summary_.snapshots;
  }
  if (action.stop) {
    stop_ = true;
    summary_.reason = action.reason;
  }
  return Ok();
}

Status Session::Loop() {
  std::optional<uint64_t> deadline;
  if (options_.duration_s) {
    deadline = NowNs(CLOCK_MONOTONIC) +
               static_cast<uint64_t>(std::llround(*options_.duration_s * 1e9));
  }
  while (!stop_) {
    uint64_t wait_until = NowNs(CLOCK_MONOTONIC) + kMaxWaitNs;
    if (deadline) wait_until = std::min(wait_until, *deadline);
    PTSCOPE_ASSIGN_OR_RETURN(SourceEvents events, source_.Run(wait_until));
    const SessionSignals::Requests requests = SessionSignals::Take();
    if (requests.interrupt || requests.terminate) {
      PTSCOPE_TRY(Act(requests.interrupt ? Stimulus::kInterrupt : Stimulus::kTerminate));
      continue;
    }
    if (requests.usr2) PTSCOPE_TRY(Act(Stimulus::kUsr2));
    if (events.trigger_hit && !stop_) PTSCOPE_TRY(Act(Stimulus::kTriggerHit, events.trigger_address));
    if (events.instruction_limit && !stop_) PTSCOPE_TRY(Act(Stimulus::kInstructionLimit));
    if (events.target_gone && !stop_) PTSCOPE_TRY(Act(Stimulus::kTargetExit));
    if (!stop_ && deadline && NowNs(CLOCK_MONOTONIC) >= *deadline) {
      PTSCOPE_TRY(Act(Stimulus::kDuration));
    }
  }
  return Ok();
}

Status Session::Finish() {
  PTSCOPE_TRY(source_.Finish());
  std::vector<std::string> warnings;
  // JIT code descriptions (jitdump, perf map), complete as of now: they name and hold JIT code.
  std::vector<format::TornJitdump> torn;
  for (const format::BlobChunk& blob : CaptureJitFiles(capture_->modules(), &warnings, &torn)) {
    PTSCOPE_TRY(capture_->WriteChunk(blob));
  }
  MetadataEntries end = {{"trigger.reason", summary_.reason},
                         {"capture.stop_realtime_ns", std::to_string(NowNs(CLOCK_REALTIME))}};
  // Jitdumps that ended mid-record: the decoder says why their newest code has no bytes.
  for (size_t i = 0; i < torn.size(); ++i) {
    for (auto& kv : format::TornJitdumpMetadata(torn[i], static_cast<unsigned>(i + 1)))
      end.push_back(std::move(kv));
  }
  for (auto& kv : source_.EndMetadata()) end.push_back(kv);
  PTSCOPE_TRY(capture_->WriteMetadata(end));
  PTSCOPE_TRY(Marker(format::MarkerKind::kCaptureStop, summary_.reason));
  PTSCOPE_TRY(capture_->Close());
  summary_.warnings.insert(summary_.warnings.end(), warnings.begin(), warnings.end());
  return Ok();
}

Result<SessionSummary> Session::Run() {
  Status status = Setup();
  if (status) status = Loop();
  if (status) status = Finish();
  if (!status) source_.Abort();
  for (std::string& w : source_.TakeWarnings()) summary_.warnings.push_back(std::move(w));
  if (capture_) {
    for (std::string& w : capture_->TakeWarnings()) summary_.warnings.push_back(std::move(w));
  }
  if (!status) return std::move(status).error();
  summary_.pt_bytes = capture_->pt_bytes();
  summary_.sideband_bytes = capture_->sideband_bytes();
  summary_.modules = static_cast<uint32_t>(capture_->modules().files().size());
  summary_.archive_bytes = capture_->bytes_written();
  return summary_;
}

}  // namespace

Result<SessionSummary> RunSession(const SessionOptions& options, PtSource& source) {
  SessionSignals signals;
  Session session(options, source);
  return session.Run();
}

SessionSignals::SessionSignals() {
  sigset_t blocked;
  sigemptyset(&blocked);
  for (int sig : kSessionSignals) sigaddset(&blocked, sig);
  sigaddset(&blocked, SIGCHLD);
  sigprocmask(SIG_BLOCK, &blocked, &g_child_mask);
  g_wait_mask = g_child_mask;
  for (int sig : kSessionSignals) sigdelset(&g_wait_mask, sig);
  sigdelset(&g_wait_mask, SIGCHLD);
  struct sigaction sa {};
  sa.sa_handler = HandleSessionSignal;  // no SA_RESTART: a wait returns EINTR
  for (int sig : kSessionSignals) sigaction(sig, &sa, nullptr);
  sa.sa_handler = HandleChild;
  sigaction(SIGCHLD, &sa, nullptr);
  g_interrupt = 0;
  g_terminate = 0;
  g_usr2 = 0;
}

SessionSignals::~SessionSignals() {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  for (int sig : kSessionSignals) sigaction(sig, &sa, nullptr);
  sigaction(SIGCHLD, &sa, nullptr);
  sigprocmask(SIG_SETMASK, &g_child_mask, nullptr);
}

bool SessionSignals::Pending() { return g_interrupt || g_terminate || g_usr2; }
const sigset_t& SessionSignals::WaitMask() { return g_wait_mask; }
const sigset_t& SessionSignals::ChildMask() { return g_child_mask; }

SessionSignals::Requests SessionSignals::Take() {
  Requests r{g_interrupt != 0, g_terminate != 0, g_usr2 != 0};
  g_interrupt = 0;
  g_terminate = 0;
  g_usr2 = 0;
  return r;
}

}  // namespace ptscope::record
