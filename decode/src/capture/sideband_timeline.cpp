// Sideband parsing: perf records from every Sideband chunk, merged in time order.
#include "capture/sideband_timeline.h"

#include <algorithm>
#include <memory>

#include "ptscope/capture.h"
#include "ptscope/perf_records.h"

namespace ptscope::decode {
namespace {

constexpr uint32_t kProtExec = 0x4;

struct TimedRecord {
  uint64_t time_ns;
  perf::Record record;
};

// Whether Apply may use `record` (MMAP/MMAP2, COMM, FORK/EXIT).
bool ChangesProcesses(const perf::Record& record) {
  return std::holds_alternative<perf::MmapRecord>(record.body) ||
         std::holds_alternative<perf::CommRecord>(record.body) ||
         std::holds_alternative<perf::TaskRecord>(record.body);
}

// Whether a mapping can hold traced code we can find bytes for.
bool IsCodeMapping(const perf::MmapRecord& mmap) {
  if (mmap.is_mmap2 && (mmap.prot & kProtExec) == 0) return false;
  if (mmap.filename == "[vdso]") return true;
  return !mmap.filename.empty() && mmap.filename[0] == '/';
}

}  // namespace

SidebandTimeline SidebandTimeline::Build(const format::Archive& archive, size_t held_runs) {
  // Without the records kept, a chunk is read again where the schedule needs it: from a copy of
  // the archive's index of its sideband (not of the archive, which may not outlive the timeline).
  const bool reread = archive.sideband_in_file();
  SidebandTimeline timeline;
  timeline.schedule_ = CpuSchedule(reread ? held_runs : SIZE_MAX);
  // The records of address spaces and names (a few per process) are kept whole until sorted;
  // a schedule record (per-CPU captures: two per context switch, as many as the capture is
  // long) goes to the schedule, which holds it as a 16-byte run or not at all (cpu_schedule.h),
  // so that a long per-CPU capture's peak memory is not its sideband's. Apply and the schedule
  // touch disjoint state, so each kind in its own time order gives what one merged order gave.
  std::vector<TimedRecord> records;
  uint64_t count = 0;
  for (const format::SidebandProblem& problem : format::ForEachSidebandRecordIn(
           archive, 0, archive.sideband.size(), [&](size_t chunk, perf::Record&& record) {
             ++count;
             uint64_t time = record.sample_id ? record.sample_id->time : 0;
             CpuSchedule::CpuRun run;
             if (ScheduleRun(record, &run)) {
               timeline.schedule_.Add(chunk, run.cpu, run.run);
               return;
             }
             if (!ChangesProcesses(record)) return;
             records.push_back(TimedRecord{time, std::move(record)});
           })) {
    timeline.unread_ += problem.unread;
    timeline.notes_.push_back(problem.Describe() + (problem.missing_attr || problem.unread != 0
                                                        ? ": skipped"
                                                        : " (rest of the chunk skipped)"));
  }
  std::stable_sort(records.begin(), records.end(),
                   [](const TimedRecord& a, const TimedRecord& b) { return a.time_ns < b.time_ns; });
  for (const TimedRecord& timed : records) timeline.Apply(timed.record, timed.time_ns);
  CpuSchedule::ChunkRuns chunk_runs;
  if (reread) {
    auto index = std::make_shared<format::Archive>();
    index->path = archive.path;
    index->sideband_attrs = archive.sideband_attrs;
    index->sideband = archive.sideband;  // (their records are empty: not kept)
    index->sideband_offsets = archive.sideband_offsets;
    index->sideband_ranges = archive.sideband_ranges;
    chunk_runs = [index](size_t chunk, std::vector<CpuSchedule::CpuRun>* runs) {
      // A malformed record ends the chunk as it did when Build read it: the runs before it are
      // what Build saw. Only a chunk that no longer reads is unreadable.
      bool readable = true;
      for (const format::SidebandProblem& problem : format::ForEachSidebandRecordIn(
               *index, chunk, chunk + 1, [&](size_t, perf::Record&& record) {
                 CpuSchedule::CpuRun run;
                 if (ScheduleRun(record, &run)) runs->push_back(run);
               })) {
        readable = readable && problem.unread == 0;
      }
      return readable;
    };
  }
  timeline.schedule_.Finish(std::move(chunk_runs));
  timeline.records_ = count;
  return timeline;
}

void SidebandTimeline::Apply(const perf::Record& record, uint64_t time_ns) {
  const perf::RecordBody& body = record.body;
  const uint32_t type = record.type;
  const uint16_t misc = record.misc;
  if (const auto* mmap = std::get_if<perf::MmapRecord>(&body)) {
    if (!IsCodeMapping(*mmap)) return;
    uint32_t module = address_space_.InternModule(mmap->filename, mmap->build_id);
    address_space_.Map(mmap->pid, time_ns, mmap->addr, mmap->len, mmap->pgoff, module);
    pid_of_tid_.emplace(mmap->tid, mmap->pid);
  } else if (const auto* comm = std::get_if<perf::CommRecord>(&body)) {
    bool exec = comm->exec || (misc & perf::kMiscCommExec) != 0;
    if (exec) address_space_.Exec(comm->pid, time_ns);
    thread_names_[comm->tid] = comm->comm;
    pid_of_tid_[comm->tid] = comm->pid;
  } else if (const auto* task = std::get_if<perf::TaskRecord>(&body)) {
    if (type == perf::kRecordFork) {
      address_space_.Fork(task->ppid, task->pid, time_ns);
      pid_of_tid_[task->tid] = task->pid;
      auto parent_name = thread_names_.find(task->ptid);
      if (parent_name != thread_names_.end() && !thread_names_.count(task->tid)) {
        thread_names_[task->tid] = parent_name->second;
      }
    }
  }
}

// Who runs on a CPU: a switch-in names the incoming thread in its sample_id; a CPU-wide
// switch-out names it in next_prev; ITRACE_START names the thread tracing starts in. False for
// any other record and for a per-thread switch-out (no one known to come in); a record without a
// sample_id has no CPU and no time.
bool SidebandTimeline::ScheduleRun(const perf::Record& record, CpuSchedule::CpuRun* run) {
  if (!record.sample_id) return false;
  const perf::SampleId& id = *record.sample_id;
  ThreadKey thread;
  if (const auto* sw = std::get_if<perf::SwitchRecord>(&record.body)) {
    if (!sw->out) {
      thread = ThreadKey{id.pid, id.tid};
    } else if (sw->cpu_wide) {
      thread = ThreadKey{sw->next_prev_pid, sw->next_prev_tid};
    } else {
      return false;
    }
  } else if (std::holds_alternative<perf::ItraceStartRecord>(record.body)) {
    thread = ThreadKey{id.pid, id.tid};
  } else {
    return false;
  }
  *run = CpuSchedule::CpuRun{id.cpu, CpuSchedule::Run{id.time, thread}};
  return true;
}

ThreadKey SidebandTimeline::ThreadOnCpu(uint32_t cpu, uint64_t time_ns, uint64_t* since_ns) const {
  return schedule_.ThreadOn(cpu, time_ns, since_ns);
}

std::vector<uint32_t> SidebandTimeline::Scheduled(uint32_t ThreadKey::*field) const {
  std::vector<uint32_t> ids;
  for (const ThreadKey& thread : schedule_.threads()) ids.push_back(thread.*field);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::vector<uint32_t> SidebandTimeline::ScheduledPids() const { return Scheduled(&ThreadKey::pid); }

std::vector<ThreadKey> SidebandTimeline::ScheduledThreads() const { return schedule_.threads(); }

size_t SidebandTimeline::ScheduledThreadCount() const {
  return Scheduled(&ThreadKey::tid).size();
}

std::string SidebandTimeline::ThreadName(uint32_t tid) const {
  auto it = thread_names_.find(tid);
  return it == thread_names_.end() ? std::string() : it->second;
}

std::string SidebandTimeline::ProcessName(uint32_t pid) const { return ThreadName(pid); }

uint32_t SidebandTimeline::PidOf(uint32_t tid) const {
  auto it = pid_of_tid_.find(tid);
  return it == pid_of_tid_.end() ? 0 : it->second;
}

}  // namespace ptscope::decode
