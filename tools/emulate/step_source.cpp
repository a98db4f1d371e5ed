#include "step_source.h"

#include <sys/utsname.h>

#include <cmath>
#include <cstdio>

#include "host_info.h"
#include "tracer_util.h"

namespace ptscope::emulate {
namespace {

std::string Hex(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

StepSource::StepSource(const EmulateOptions& options, std::string ground_truth, double virtual_ghz)
    : options_(options), ground_truth_(std::move(ground_truth)), virtual_ghz_(virtual_ghz) {
  time_.mult =
      static_cast<uint32_t>(std::llround(static_cast<double>(1u << time_.shift) / virtual_ghz_));
}

StepSource::~StepSource() = default;

record::LaunchOptions StepSource::launch_options() const {
  record::LaunchOptions launch;
  launch.control = record::LaunchOptions::Control::kSeized;
  launch.ptrace_options = PtraceOptionsFor(options_);
  return launch;
}

// The PT configuration the encoder models, as perf's intel_pt attr.config and the pt.* keys;
// cpuid 0x15 and the non-turbo ratio of the virtual clock (1 instruction = 1 cycle = 1 tick).
record::MetadataEntries StepSource::Metadata() const {
  const EncoderConfig& e = options_.encoder;
  const bool tsc = e.timing != TimingMode::kNone, mtc = e.timing >= TimingMode::kMtc,
             cyc = e.timing == TimingMode::kCyc;
  uint64_t psb_code = 0;
  while (psb_code < 15 && (uint64_t{1} << (psb_code + 12)) <= e.psb_period) ++psb_code;
  const uint64_t config = 1 | (uint64_t{1} << 13) | (tsc ? 1u << 10 : 0) | (mtc ? 1u << 9 : 0) |
                          (cyc ? 1u << 1 : 0) | (e.return_compression ? 0 : 1u << 11) |
                          (mtc ? uint64_t{e.mtc_freq} << 14 : 0) | (psb_code << 24);
  utsname uts{};
  uname(&uts);
  auto u = [](uint64_t v) { return std::to_string(v); };
  char ghz[32];
  std::snprintf(ghz, sizeof(ghz), "%g", virtual_ghz_);
  record::MetadataEntries entries = {{"kernel.release", uts.release}};
  for (auto& kv : record::CpuMetadata(record::ReadCpuIdentity())) entries.push_back(kv);
  record::MetadataEntries pt = {
      {"pt.config", Hex(config)}, {"pt.tsc", u(tsc)}, {"pt.mtc", u(mtc)},
      {"pt.mtc_period", u(e.mtc_freq)}, {"pt.cyc", u(cyc)}, {"pt.cyc_thresh", "0"},
      {"pt.psb_period", u(e.psb_period)}, {"pt.noretcomp", u(!e.return_compression)},
      {"pt.branch", "1"}, {"pt.user", "1"}, {"pt.kernel", "0"}, {"pt.filters", ""},
      {"pt.max_nonturbo_ratio", u(e.cbr)}, {"pt.cpuid15_eax", "1"},
      {"pt.cpuid15_ebx", u(e.tsc_per_ctc)},
      {"time.shift", u(time_.shift)}, {"time.mult", u(time_.mult)}, {"time.zero", u(time_.zero)},
      {"time.cap_user_time_zero", "1"}, {"emulate.virtual_ghz", ghz},
  };
  if (options_.real_clock) pt.push_back({"emulate.clock", "real"});  // virtual: absent, as before
  entries.insert(entries.end(), pt.begin(), pt.end());
  if (options_.cpus > 0) {  // per-CPU captures only: per-thread archives stay as they were
    entries.push_back({"emulate.cpus", u(options_.cpus)});
    entries.push_back({"emulate.timeslice", u(options_.timeslice)});
  }
  return entries;
}

Result<record::SourceDescription> StepSource::Open(record::Target& target,
                                                   const record::SourceSettings& settings) {
  if (settings.mode == record::SourceSettings::Mode::kAllCpus) {
    return MakeError(Errc::kInvalidArgument, "pt-emulate traces a program or -p PID, not -a");
  }
  settings_ = settings;
  target_ = &target;
  if (!settings.snapshot) options_.snapshot_size = 0;
  options_.trigger = settings.trigger;
  if (settings.mode == record::SourceSettings::Mode::kAttach) {
    for (int pid : target.pids()) {
      PTSCOPE_ASSIGN_OR_RETURN(std::vector<int> tids, SeizeThreads(pid, PtraceOptionsFor(options_)));
      seized_.emplace_back(pid, std::move(tids));
    }
  }
  record::SourceDescription d;
  d.tool = "pt-emulate";
  d.features = format::kFeatureEmulated;
  if (options_.cpus > 0) d.features |= format::kFeaturePerCpu;
  d.metadata = Metadata();
  return d;
}

Status StepSource::Start(record::CaptureWriter& capture) {
  if (!ground_truth_.empty()) {
    PTSCOPE_ASSIGN_OR_RETURN(truth_, GroundTruthWriter::Create(ground_truth_));
  }
  tracer_ = std::make_unique<Tracer>(options_, &capture, truth_.get(), time_);
  if (settings_.mode == record::SourceSettings::Mode::kRun) {
    PTSCOPE_TRY(tracer_->AdoptLaunched(target_->pids().front()));
  } else {
    for (const auto& [pid, tids] : seized_) PTSCOPE_TRY(tracer_->AdoptAttached(pid, tids));
  }
  return target_->Resume();  // the tracer resumes and reaps it from now on
}

Result<record::SourceEvents> StepSource::Run(uint64_t deadline_ns) {
  return tracer_->Run(deadline_ns);
}

Status StepSource::Snapshot(uint32_t index, bool final) { return tracer_->Snapshot(index, final); }

Status StepSource::Finish() {
  PTSCOPE_TRY(tracer_->Finish());
  if (truth_) PTSCOPE_TRY(truth_->Close());
  return Ok();
}

void StepSource::Abort() {
  if (tracer_) tracer_->Abort();
}

std::vector<std::string> StepSource::TakeWarnings() {
  return tracer_ ? tracer_->TakeWarnings() : std::vector<std::string>{};
}

uint64_t StepSource::NowTsc() { return tracer_ ? tracer_->clock() : Tracer::kTscBase; }

const TraceSummary& StepSource::summary() const {
  return tracer_ ? tracer_->summary() : empty_summary_;
}

}  // namespace ptscope::emulate
