// pt-emulate's PT source for the recording session (record/src/session.h): the Tracer
// single-steps the target under ptrace and its encoder writes the PT packets the hardware would
// have written. Lives here, not in record/, so that pt-record (static, small) never links ptrace
// stepping, Zydis or libipt.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pt_source.h"
#include "tracer.h"

namespace ptscope::emulate {

class StepSource final : public record::PtSource {
 public:
  // `ground_truth`: a path for the "TID 0xADDRESS" list of traced instructions, or empty.
  StepSource(const EmulateOptions& options, std::string ground_truth, double virtual_ghz);
  ~StepSource() override;

  record::LaunchOptions launch_options() const override;
  Result<record::SourceDescription> Open(record::Target& target,
                                         const record::SourceSettings& settings) override;
  Status Start(record::CaptureWriter& capture) override;
  Result<record::SourceEvents> Run(uint64_t deadline_ns) override;
  Status Snapshot(uint32_t index, bool final) override;
  Status Finish() override;
  void Abort() override;
  uint64_t NowTsc() override;
  std::vector<std::string> TakeWarnings() override;

  const TraceSummary& summary() const;

 private:
  record::MetadataEntries Metadata() const;

  EmulateOptions options_;
  std::string ground_truth_;
  double virtual_ghz_;
  TimeConversion time_;
  record::SourceSettings settings_;
  record::Target* target_ = nullptr;
  std::vector<std::pair<pid_t, std::vector<int>>> seized_;  // attach mode: threads by process
  std::unique_ptr<GroundTruthWriter> truth_;
  std::unique_ptr<Tracer> tracer_;
  TraceSummary empty_summary_;
};

}  // namespace ptscope::emulate
