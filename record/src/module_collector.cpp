#include "module_collector.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "sideband_layout.h"

namespace ptscope::record {

void ModuleCollector::Scan(std::span<const uint8_t> records) {
  perf::RecordIterator it(records, SidebandLayout());
  while (auto next = it.Next()) {
    if (!*next) {
      ++malformed_;
      return;
    }
    const perf::Record& record = next->value();
    if (const auto* comm = std::get_if<perf::CommRecord>(&record.body)) pids_.insert(comm->pid);
    const auto* mmap = std::get_if<perf::MmapRecord>(&record.body);
    if (mmap == nullptr) continue;
    pids_.insert(mmap->pid);
    // perf's convention: the runtime maps its own jit-<pid>.dump executable as a marker.
    std::string jit_name = "/jit-" + std::to_string(mmap->pid) + ".dump";
    if (mmap->filename.size() > jit_name.size() &&
        mmap->filename.compare(mmap->filename.size() - jit_name.size(), jit_name.size(),
                               jit_name) == 0) {
      jitdumps_[mmap->pid].insert(mmap->filename);
    }
    if (mmap->filename == "[vdso]") {
      vdso_by_pid_.emplace(mmap->pid, mmap->addr);
      continue;
    }
    if (mmap->filename.empty() || mmap->filename[0] != '/') continue;
    auto [pos, inserted] = files_.emplace(mmap->filename, mmap->build_id);
    if (inserted) new_files_.push_back(mmap->filename);
    if (!inserted && pos->second.empty()) pos->second = mmap->build_id;
  }
}

std::vector<std::pair<std::string, std::vector<uint8_t>>> ModuleCollector::TakeNewFiles() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> files;
  for (const std::string& path : new_files_) files.emplace_back(path, files_.at(path));
  new_files_.clear();
  return files;
}

format::ModuleChunk DescribeModule(const std::string& path, const std::vector<uint8_t>& build_id,
                                   BuildIdCache* build_ids) {
  format::ModuleChunk module;
  module.path = path;
  module.build_id = build_id.empty() ? build_ids->Get(path, 0, nullptr) : build_id;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    module.size = static_cast<uint64_t>(st.st_size);
    module.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }
  return module;
}

std::optional<uint64_t> ModuleCollector::VdsoAddress(uint32_t pid) const {
  auto it = vdso_by_pid_.find(pid);
  if (it == vdso_by_pid_.end()) return std::nullopt;
  return it->second;
}

namespace {

// Upper bound of one Blob chunk's payload (FORMAT.md: raw chunks are at most 1 GiB).
constexpr uint64_t kMaxJitFileBytes = (1ull << 30) - 4096;

// The whole file, if it is a regular file (not a symlink) owned by us or by process `pid`.
Result<std::vector<uint8_t>> ReadOwnedFile(const std::string& path, uint32_t pid) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return MakeError(errno == ENOENT ? Errc::kNotFound : Errc::kIo,
                               path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  struct stat proc {};
  bool proc_known = ::stat(("/proc/" + std::to_string(pid)).c_str(), &proc) == 0;
  std::string refusal;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    refusal = "not a regular file";
  } else if (st.st_uid != ::getuid() && !(proc_known && st.st_uid == proc.st_uid)) {
    refusal = "owned by uid " + std::to_string(st.st_uid) + ", not by the traced process";
  } else if (static_cast<uint64_t>(st.st_size) > kMaxJitFileBytes) {
    refusal = std::to_string(st.st_size) + " bytes, above the 1 GiB chunk limit";
  }
  if (!refusal.empty()) {
    ::close(fd);
    return MakeError(Errc::kPermission, path + ": " + refusal + "; not captured");
  }
  // Read to EOF, not to st_size: the runtime may still be appending.
  std::vector<uint8_t> bytes;
  uint8_t buffer[65536];
  while (bytes.size() <= kMaxJitFileBytes) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return MakeError(Errc::kIo, path + ": read failed: " + std::strerror(err));
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buffer, buffer + n);
  }
  ::close(fd);
  if (bytes.size() > kMaxJitFileBytes) {
    return MakeError(Errc::kIo, path + ": grew above the 1 GiB chunk limit; not captured");
  }
  return bytes;
}

}  // namespace

std::vector<format::BlobChunk> CaptureJitFiles(const ModuleCollector& modules,
                                               std::vector<std::string>* warnings) {
  std::vector<format::BlobChunk> blobs;
  auto capture = [&](format::BlobKind kind, uint32_t pid, const std::string& path,
                     bool must_exist) {
    Result<std::vector<uint8_t>> bytes = ReadOwnedFile(path, pid);
    if (!bytes) {
      if (must_exist || bytes.error().code != Errc::kNotFound) {
        warnings->push_back(bytes.error().message);
      }
      return;
    }
    format::BlobChunk blob;
    blob.kind = kind;
    blob.pid = pid;
    blob.name = path;
    blob.data = std::move(*bytes);
    blobs.push_back(std::move(blob));
  };
  for (const auto& [pid, paths] : modules.jitdumps()) {
    for (const std::string& path : paths) capture(format::BlobKind::kJitdump, pid, path, true);
  }
  for (uint32_t pid : modules.pids()) {
    capture(format::BlobKind::kPerfMap, pid, "/tmp/perf-" + std::to_string(pid) + ".map", false);
  }
  return blobs;
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
