// pt-record's PT source: the kernel's intel_pt PMU. One intel_pt event per target thread (or per
// CPU with -a) with its AUX area (read-only: the kernel overwrites it as a snapshot ring;
// writable: every byte, "full"), a dummy software event per CPU whose ring carries the sideband
// (MMAP2 with build ids, COMM, FORK/EXIT, context switches), /proc synthesis for what existed
// before, and execute breakpoints for --trigger. It talks to the kernel only through PerfKernel,
// so tests run it against a model of the kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "host_info.h"
#include "perf_event.h"
#include "perf_sideband.h"
#include "pt_aux_ring.h"
#include "pt_config.h"
#include "pt_filter.h"
#include "pt_source.h"
#include "ring_budget.h"

namespace ptscope::record {

struct KernelSourceOptions {
  bool sideband_only = false;  // no PT: sideband, modules, vdso and metadata only
  uint64_t aux_bytes = 0;      // per PT event (power of two pages); 0 = default
  PtOptions pt;
  std::string filter;          // --filter text
};

class KernelPtSource final : public PtSource {
 public:
  KernelPtSource(PerfKernel& kernel, const HostFacts& facts, const KernelSourceOptions& options,
                 std::function<void(const std::string&)> note);
  ~KernelPtSource() override;

  LaunchOptions launch_options() const override { return {}; }
  Result<SourceDescription> Open(Target& target, const SourceSettings& settings) override;
  Status Start(CaptureWriter& capture) override;
  Result<SourceEvents> Run(uint64_t deadline_ns) override;
  Status Snapshot(uint32_t index, bool final) override;
  Status Finish() override;
  void Abort() override {}
  uint64_t NowTsc() override;
  MetadataEntries EndMetadata() override;
  std::vector<std::string> TakeWarnings() override;

 private:
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
  };

  Result<std::optional<PerfEvent>> OpenFor(const perf_event_attr& attr, int tid, int cpu,
                                           const std::string& what);
  Status EnsureDescriptors(uint64_t events, uint64_t threads, uint64_t cpus);
  Status OpenSideband(const std::vector<int>& tids, const std::vector<int>& cpus);
  Status OpenPt(const std::vector<int>& tids, const std::vector<int>& cpus);
  Status OpenTrigger(const std::vector<int>& tids);
  Status SynthesizeAndVdso();
  Status DrainSideband(bool force_flush);
  Status DrainPtRecords(PtStream& stream);
  Status DrainPtFull();
  Status WritePiece(const PtStream& stream, const AuxPiece& piece, uint32_t snapshot_index);
  bool TriggerHit();
  bool all_cpus() const { return settings_.mode == SourceSettings::Mode::kAllCpus; }

  PerfKernel& kernel_;
  const HostFacts& facts_;
  KernelSourceOptions options_;
  bool aux_is_default_ = true;
  RingPlan rings_;
  std::function<void(const std::string&)> note_;
  SourceSettings settings_;
  Target* target_ = nullptr;
  CaptureWriter* capture_ = nullptr;
  std::vector<SidebandRing> sideband_;
  std::vector<PerfEvent> redirected_;
  std::vector<PtStream> pt_;
  std::vector<PerfEvent> breakpoints_;
  std::vector<uint64_t> ids_;
  std::map<int, int> process_of_;    // tid → its process (attach mode: each -p PID's threads)
  std::set<int> vanished_;           // threads that exited between listing and opening
  perf_event_attr sideband_attr_{};  // as the kernel accepted it
  PtConfig pt_config_;
  PerfClock clock_;
  uint64_t trigger_address_ = 0;
  std::set<int> quiet_fds_;
  std::vector<std::string> warnings_;
};

// PERF_TYPE_BREAKPOINT / HW_BREAKPOINT_X at `address`, one sample per hit (TID|TIME|IP).
perf_event_attr BuildBreakpointAttr(uint64_t address);

// What --filter may ask on this host, in this mode.
FilterLimits FilterLimitsOf(const HostFacts& facts, bool all_cpus);

// Default AUX size: 4 MiB when the mlock limit does not apply, else 256 KiB (magic-trace's).
uint64_t DefaultAuxBytes(const HostFacts& facts);
// "4M", "256K", "1G", "65536" → bytes, rounded up to a power-of-two number of pages.
Result<uint64_t> ParseBufferSize(const std::string& text);

}  // namespace ptscope::record
