#include "pt_archive_out.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iterator>

namespace ptscope::record {

MetadataEntries HostMetadata(const HostFacts& f, const std::string& tool_version) {
  MetadataEntries m = {
      {"tool", "pt-record"},
      {"tool.version", tool_version},
      {"host.name", f.host_name},
      {"kernel.release", f.kernel_release},
      {"cpu.vendor", f.cpu.vendor},
      {"cpu.family", std::to_string(f.cpu.family)},
      {"cpu.model", std::to_string(f.cpu.model)},
      {"cpu.stepping", std::to_string(f.cpu.stepping)},
  };
  if (f.cpu.leaf15) {
    m.emplace_back("pt.cpuid15_eax", std::to_string(f.cpu.leaf15->eax));
    m.emplace_back("pt.cpuid15_ebx", std::to_string(f.cpu.leaf15->ebx));
  }
  if (f.pt.max_nonturbo_ratio)
    m.emplace_back("pt.max_nonturbo_ratio", std::to_string(*f.pt.max_nonturbo_ratio));
  for (const auto& [name, value] : f.pt.caps) m.emplace_back("pt.caps." + name, value);
  return m;
}

void ModuleCollector::Scan(const std::vector<uint8_t>& records) {
  perf::RecordIterator it(records, SidebandLayout());
  while (auto next = it.Next()) {
    if (!*next) {
      ++malformed_;
      return;
    }
    const perf::Record& record = next->value();
    const auto* mmap = std::get_if<perf::MmapRecord>(&record.body);
    if (mmap == nullptr) continue;
    if (mmap->filename == "[vdso]") {
      vdso_by_pid_.emplace(mmap->pid, mmap->addr);
      continue;
    }
    if (mmap->filename.empty() || mmap->filename[0] != '/') continue;
    auto [pos, inserted] = files_.emplace(mmap->filename, mmap->build_id);
    if (!inserted && pos->second.empty()) pos->second = mmap->build_id;
  }
}

std::vector<format::ModuleChunk> ModuleCollector::Modules(BuildIdCache* build_ids) const {
  std::vector<format::ModuleChunk> modules;
  for (const auto& [path, id] : files_) {
    format::ModuleChunk module;
    module.path = path;
    module.build_id = id.empty() ? build_ids->Get(path, 0, nullptr) : id;
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) {
      module.size = static_cast<uint64_t>(st.st_size);
      module.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    }
    modules.push_back(std::move(module));
  }
  return modules;
}

std::optional<uint64_t> ModuleCollector::VdsoAddress(uint32_t pid) const {
  auto it = vdso_by_pid_.find(pid);
  if (it == vdso_by_pid_.end()) return std::nullopt;
  return it->second;
}

Result<format::BlobChunk> EmbedModule(const format::ModuleChunk& module) {
  std::ifstream in(module.path, std::ios::binary);
  if (!in) return MakeError(Errc::kNotFound, module.path + ": cannot open to embed it");
  format::BlobChunk blob;
  blob.kind = format::BlobKind::kElf;
  blob.name = module.path;
  blob.build_id = module.build_id;
  blob.data.assign(std::istreambuf_iterator<char>(in), {});
  if (blob.data.size() != module.size)
    return MakeError(Errc::kIo, module.path + ": read " + std::to_string(blob.data.size()) +
                                    " bytes, expected " + std::to_string(module.size));
  return blob;
}

}  // namespace ptscope::record
