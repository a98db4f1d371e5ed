// SpeedscopeSink: speedscope's file format (https://www.speedscope.app/file-format-schema.json),
// for the offline viewer (the speedscope npm package opens it without any network). One "evented"
// profile per thread, in (pid, tid) order, named "PROCESS: THREAD PID/TID": the exact open and
// close events of every slice in time order (speedscope's "Time Order" view is the timeline, not
// merged stacks); times in nanoseconds from the capture start. Frames are shared: one per
// (name, file, line), with the file and line when known, else the module as the file. Instants have no place in the format;
// they only move the thread's last time, where Finish closes what is still open.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "events.h"
#include "sink/frame_name_cache.h"
#include "sink/output_file.h"

namespace ptscope::decode {

class SpeedscopeSink : public SliceSink {
 public:
  SpeedscopeSink(std::unique_ptr<OutputFile> out, FrameNamer& namer);

  void BeginThread(const ThreadKey& thread, const std::string& process_name,
                   const std::string& thread_name) override;
  void Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
             bool inferred) override;
  void End(const ThreadKey& thread, uint64_t time_ns) override;
  void Instant(const ThreadKey& thread, uint64_t time_ns, const std::string&) override;
  void WriteRecords(const ThreadKey& thread, const SliceRecord* records, size_t count) override;
  void Finish() override;
  std::string OutputError() const override { return error_; }

 private:
  struct Event {
    uint64_t at;
    uint32_t frame;
    bool open;
  };
  struct ThreadLog {
    std::string process_name, thread_name;
    std::vector<Event> events;
    std::vector<uint32_t> open;  // frame indexes of the open slices, innermost last
    uint64_t last_time = 0;      // also the floor of the next event: speedscope needs order
  };
  void BeginLocked(const ThreadKey& thread, ThreadLog& log, uint64_t time_ns, const FrameId& frame);
  void EndLocked(ThreadLog& log, uint64_t time_ns);
  uint32_t FrameIndex(const ResolvedFrame& frame);

  std::mutex mutex_;
  std::unique_ptr<OutputFile> out_;
  FrameNameCache names_;
  // Frame indexes by the name cache's entry (its name string: one per pid and address), and by
  // value (name, file, line, module): addresses with equal names share a frame.
  std::unordered_map<const std::string*, uint32_t> frame_of_entry_;
  std::map<std::tuple<std::string, std::string, uint32_t, std::string>, uint32_t> frame_of_value_;
  std::vector<ResolvedFrame> frames_;
  std::map<std::pair<uint32_t, uint32_t>, ThreadLog> threads_;
  bool finished_ = false;
  std::string error_;
};

}  // namespace ptscope::decode
