// (see capture_mappings.h)
#include "capture_mappings.h"

#include <sys/mman.h>

#include <variant>

#include "ptscope/capture.h"
#include "ptscope/perf_records.h"

namespace ptscope::oracle {

CaptureMappings CollectMappings(const format::Archive& archive, std::string* error) {
  CaptureMappings result;
  auto& by_pid = result.by_pid;
  std::vector<format::SidebandProblem> problems =
      format::ForEachSidebandRecord(archive, [&](perf::Record&& record) {
        if (const auto* mmap = std::get_if<perf::MmapRecord>(&record.body)) {
          result.pid_of_tid.emplace(mmap->tid, mmap->pid);
          bool executable = !mmap->is_mmap2 || (mmap->prot & PROT_EXEC) != 0;
          if (executable && !mmap->filename.empty() && mmap->filename[0] == '/') {
            by_pid[mmap->pid].push_back({mmap->filename, mmap->addr, mmap->len, mmap->pgoff});
          }
        } else if (const auto* comm = std::get_if<perf::CommRecord>(&record.body)) {
          result.pid_of_tid.emplace(comm->tid, comm->pid);
          if (comm->exec) by_pid[comm->pid].clear();
        } else if (const auto* task = std::get_if<perf::TaskRecord>(&record.body)) {
          result.pid_of_tid.emplace(task->tid, task->pid);
          if (!task->is_exit && task->pid != task->ppid) by_pid[task->pid] = by_pid[task->ppid];
        }
      });
  if (!problems.empty()) {
    *error = problems.front().Describe();
    return {};
  }
  return result;
}

}  // namespace ptscope::oracle
