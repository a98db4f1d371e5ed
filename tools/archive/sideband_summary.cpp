#include "sideband_summary.h"

#include <variant>

#include "ptscope/capture.h"
#include "ptscope/perf_records.h"

namespace ptscope::tools {
namespace {

void Apply(const perf::Record& record, SidebandSummary& s) {
  if (const auto* comm = std::get_if<perf::CommRecord>(&record.body)) {
    ProcessSummary& p = s.processes[comm->pid];
    p.threads[comm->tid].comm = comm->comm;
    if (comm->tid == comm->pid) p.comm = comm->comm;
    p.exec |= comm->exec;
  } else if (const auto* task = std::get_if<perf::TaskRecord>(&record.body)) {
    ProcessSummary& p = s.processes[task->pid];
    ThreadSummary& t = p.threads[task->tid];
    if (task->is_exit) {
      t.exited = true;
      if (task->tid == task->pid) p.exited = true;
    } else if (task->tid == task->pid) {
      p.ppid = task->ppid;  // a new process (a new thread has pid == ppid)
    }
  } else if (const auto* lost = std::get_if<perf::LostRecord>(&record.body)) {
    s.lost_events += lost->lost;
  } else if (const auto* aux = std::get_if<perf::AuxRecord>(&record.body)) {
    if (aux->flags & perf::kAuxFlagTruncated) ++s.aux_truncated;
  }
}

}  // namespace

std::string RecordTypeName(uint32_t type) {
  switch (type) {
    case perf::kRecordMmap: return "MMAP";
    case perf::kRecordLost: return "LOST";
    case perf::kRecordComm: return "COMM";
    case perf::kRecordExit: return "EXIT";
    case perf::kRecordFork: return "FORK";
    case perf::kRecordMmap2: return "MMAP2";
    case perf::kRecordAux: return "AUX";
    case perf::kRecordItraceStart: return "ITRACE_START";
    case perf::kRecordSwitch: return "SWITCH";
    case perf::kRecordSwitchCpuWide: return "SWITCH_CPU_WIDE";
    default: return "type " + std::to_string(type);
  }
}

SidebandSummary SummarizeSideband(const format::Archive& archive) {
  SidebandSummary s;
  for (const format::SidebandProblem& problem :
       format::ForEachSidebandRecord(archive, [&](perf::Record&& record) {
         ++s.records;
         ++s.records_by_type[record.type];
         Apply(record, s);
       })) {
    const std::string chunk = "sideband chunk " + std::to_string(problem.chunk) + ": ";
    s.problems.push_back(problem.missing_attr
                             ? chunk + "no SidebandAttr chunk for attr_id " +
                                   std::to_string(problem.attr_id) + "; records skipped"
                             : chunk + problem.error);
  }
  return s;
}

}  // namespace ptscope::tools
