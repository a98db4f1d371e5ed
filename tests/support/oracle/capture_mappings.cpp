// (see capture_mappings.h)
#include "capture_mappings.h"

#include <sys/mman.h>

#include <variant>

#include "ptscope/perf_records.h"

namespace ptscope::oracle {

CaptureMappings CollectMappings(const format::Archive& archive, std::string* error) {
  std::map<uint32_t, perf::RecordLayout> layouts;
  for (const auto& attr : archive.sideband_attrs) {
    layouts[attr.attr_id] = {attr.sample_type, attr.sample_id_all};
  }
  CaptureMappings result;
  auto& by_pid = result.by_pid;
  for (const auto& chunk : archive.sideband) {
    auto layout = layouts.find(chunk.attr_id);
    if (layout == layouts.end()) {
      *error = "sideband chunk names attr_id " + std::to_string(chunk.attr_id) +
               " without a SidebandAttr chunk";
      return {};
    }
    perf::RecordIterator records(chunk.records, layout->second);
    while (auto parsed = records.Next()) {
      if (!parsed->has_value()) {
        *error = "sideband record at offset " + std::to_string(records.offset()) + ": " +
                 parsed->error().message;
        return {};
      }
      const perf::Record& record = parsed->value();
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
    }
  }
  return result;
}

}  // namespace ptscope::oracle
