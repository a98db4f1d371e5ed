// `--format insns`: every retired instruction as "TID 0xADDRESS", in program order, through
// libipt's instruction decoder (exact by construction; the e2e corpus compares it with
// pt-emulate's ground truth).
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "flow/code_images.h"
#include "capture/decoder_setup.h"
#include "capture/sideband_timeline.h"

namespace ptscope::decode {

// Buffered writer of "TID 0xADDRESS\n" lines (no printf on the hot path).
class InsnWriter {
 public:
  explicit InsnWriter(std::FILE* out) : out_(out) {}
  ~InsnWriter() { Flush(); }
  void Write(uint32_t tid, uint64_t address);
  void Flush();
  bool failed() const { return failed_; }

 private:
  std::FILE* out_;
  char buffer_[1 << 16];
  size_t used_ = 0;
  bool failed_ = false;
};

class InsnLister {
 public:
  InsnLister(const DecoderSetup& setup, const CodeImages& images, uint32_t pid, uint32_t tid,
             InsnWriter& writer)
      : setup_(setup), image_(images, pid), tid_(tid), writer_(writer), writer_now_(&writer) {}
  // A per-CPU stream: the thread (its address space and the tid printed) follows `cpu`'s schedule
  // in the sideband, looked up whenever tracing is enabled again and at every sync point.
  // `switch_run` is called whenever the thread changes (with the new thread and the time) and
  // returns the writer for that thread's next stretch of instructions (so that the caller can
  // put each thread's stretches from several CPUs back in time order).
  void FollowCpu(const SidebandTimeline& timeline, uint32_t cpu,
                 std::function<InsnWriter*(ThreadKey, uint64_t)> switch_run) {
    timeline_ = &timeline;
    cpu_ = cpu;
    switch_run_ = std::move(switch_run);
  }
  void DecodeSegment(const uint8_t* begin, size_t size);
  uint64_t instructions() const { return instructions_; }
  uint64_t errors() const { return errors_; }
  const std::string& first_error() const { return first_error_; }

 private:
  void UpdateImage(pt_insn_decoder* decoder, uint64_t tsc, bool have_time);
  void NoteError(int error, pt_insn_decoder* decoder);
  void FollowSchedule(uint64_t tsc, bool have_time);

  const DecoderSetup& setup_;
  ThreadImage image_;
  uint32_t tid_;
  InsnWriter& writer_;
  const SidebandTimeline* timeline_ = nullptr;
  std::function<InsnWriter*(ThreadKey, uint64_t)> switch_run_;
  bool have_thread_ = false;
  ThreadKey thread_;
  uint64_t thread_since_ns_ = 0;  // when thread_'s stretch on cpu_ began (its switch-in)
  InsnWriter* writer_now_ = nullptr;
  uint32_t cpu_ = 0;
  uint64_t instructions_ = 0;
  uint64_t errors_ = 0;
  std::string first_error_;
};

}  // namespace ptscope::decode
