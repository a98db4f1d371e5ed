// A sink that keeps nothing: decoding for the summary's counts only (PipelineOptions::count_only).
#pragma once

#include "events.h"

namespace ptscope::decode {

class NullSink : public SliceSink {
 public:
  void BeginThread(const ThreadKey&, const std::string&, const std::string&) override {}
  void Begin(const ThreadKey&, uint64_t, const FrameId&, bool) override {}
  void End(const ThreadKey&, uint64_t) override {}
  void Instant(const ThreadKey&, uint64_t, const std::string&) override {}
  void WriteRecords(const ThreadKey&, const SliceRecord*, size_t) override {}
  void Finish() override {}
};

}  // namespace ptscope::decode
