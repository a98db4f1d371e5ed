#include "module_collector.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "ptscope/format.h"
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

// Where a jitdump's complete records end. A runtime appends records while it runs, so the file
// can end inside the header or inside its last record; only the framing is read here (the
// decoder parses the bodies): magic (byte order), header total_size at offset 8, then per record
// u32 id, u32 total_size, u64 timestamp and its body.
struct JitdumpTail {
  uint64_t complete_end = 0;     // bytes of the header and the whole records
  uint64_t records = 0;          // whole records
  bool torn = false;             // the file ends inside the header or a record
  uint64_t torn_size = 0;        // the torn record's total_size, 0 when not yet written
  std::set<uint64_t> code_addrs; // where the whole LOAD and MOVE records put code
};

JitdumpTail ScanJitdumpTail(const std::vector<uint8_t>& bytes) {
  JitdumpTail tail;
  const size_t size = bytes.size();
  if (size < 12) {
    tail.torn = true;
    return tail;
  }
  // "JiTD" as the writer's u32: little-endian on disk reads 'D','T','i','J'.
  const bool swap = bytes[0] == 'J';
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{bytes[at + (swap ? 3 - i : i)]} << (8 * i);
    return v;
  };
  auto u64 = [&](size_t at) {
    return swap ? (uint64_t{u32(at)} << 32 | u32(at + 4)) : (u32(at) | uint64_t{u32(at + 4)} << 32);
  };
  const uint64_t header = u32(8);
  if (header > size) {
    tail.torn = true;
    return tail;
  }
  uint64_t offset = header;
  while (offset < size) {
    if (size - offset < 8) {  // the record's total_size is not written yet
      tail.torn = true;
      break;
    }
    const uint32_t id = u32(offset);
    const uint64_t record = u32(offset + 4);
    if (record < 16) break;  // damage, not a record in progress: the decoder reports it
    if (record > size - offset) {
      tail.torn = true;
      tail.torn_size = record;
      break;
    }
    if (id == 0 && record >= 40) tail.code_addrs.insert(u64(offset + 32));  // CODE_LOAD
    if (id == 1 && record >= 48) tail.code_addrs.insert(u64(offset + 40));  // CODE_MOVE
    offset += record;
    ++tail.records;
  }
  tail.complete_end = offset;
  return tail;
}

using ::ptscope::format::HexAddress;

// What a torn jitdump leaves without bytes, named from the process's perf map. The runtime
// writes both files in the same order, so the code without bytes is what the map lists after the
// newest code the whole records hold, at addresses no whole record holds (V8's map also lists
// bytecode, which its jitdump never has: those before that point are not counted). Oldest first.
std::vector<format::TornJitCode> MissingCode(const JitdumpTail& tail,
                                             const format::BlobChunk& perf_map) {
  std::vector<format::TornJitCode> missing;
  std::string_view text(reinterpret_cast<const char*>(perf_map.data.data()), perf_map.data.size());
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string line(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    unsigned long long start = 0, length = 0;
    int name_at = 0;
    if (std::sscanf(line.c_str(), "%llx %llx %n", &start, &length, &name_at) != 2 || name_at == 0)
      continue;
    if (tail.code_addrs.count(start) != 0) {
      missing.clear();  // held by a whole record: what came before was written before it
      continue;
    }
    missing.push_back({start, length, line.substr(static_cast<size_t>(name_at))});
  }
  return missing;
}

// The end of the warning: the code left without bytes, the newest (last written) three named.
std::string NameMissingCode(const std::vector<format::TornJitCode>& missing, bool have_map,
                            const std::string& map_path) {
  if (!have_map) {
    return "the runtime wrote no " + map_path + " to name it (node: --perf-basic-prof)";
  }
  if (missing.empty()) return map_path + " names nothing the jitdump lacks";
  std::string names;
  const size_t shown = std::min<size_t>(3, missing.size());
  for (size_t i = missing.size() - shown; i < missing.size(); ++i)
    names += (names.empty() ? "" : ", ") + missing[i].name + " at " + HexAddress(missing[i].address);
  std::string count = std::to_string(missing.size()) +
                      (missing.size() == 1 ? " function" : " functions");
  return map_path + " names " + count + " the jitdump lacks" +
         (missing.size() > shown ? " (newest: " : " (") + names + ")";
}

// Reads a jitdump until its last record is whole, polling while a writer may still finish it.
// A tail still torn at the limit is cut off (the whole records are kept) and described.
Result<std::vector<uint8_t>> ReadJitdump(const std::string& path, uint32_t pid,
                                         const JitTailWait& wait, JitdumpTail* tail_out) {
  const auto give_up = std::chrono::steady_clock::now() + wait.limit;
  for (;;) {
    PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadOwnedFile(path, pid));
    bool not_jitdump = bytes.size() >= 4 && !(std::memcmp(bytes.data(), "DTiJ", 4) == 0 ||
                                              std::memcmp(bytes.data(), "JiTD", 4) == 0);
    if (not_jitdump) return bytes;  // the decoder names what it is not
    *tail_out = ScanJitdumpTail(bytes);
    if (!tail_out->torn || std::chrono::steady_clock::now() >= give_up) return bytes;
    std::this_thread::sleep_for(wait.poll);
  }
}

}  // namespace

std::vector<format::BlobChunk> CaptureJitFiles(const ModuleCollector& modules,
                                               std::vector<std::string>* warnings,
                                               std::vector<format::TornJitdump>* torn_out) {
  return CaptureJitFiles(modules.jitdumps(), modules.pids(), warnings, JitTailWait{}, torn_out);
}

std::vector<format::BlobChunk> CaptureJitFiles(
    const std::map<uint32_t, std::set<std::string>>& jitdumps, const std::set<uint32_t>& pids,
    std::vector<std::string>* warnings, const JitTailWait& wait,
    std::vector<format::TornJitdump>* torn_out) {
  std::vector<format::BlobChunk> blobs;
  auto keep = [&](format::BlobKind kind, uint32_t pid, const std::string& path,
                  std::vector<uint8_t> data) {
    format::BlobChunk blob;
    blob.kind = kind;
    blob.pid = pid;
    blob.name = path;
    blob.data = std::move(data);
    blobs.push_back(std::move(blob));
  };
  struct Torn {
    std::string path;
    uint32_t pid;
    JitdumpTail tail;
    uint64_t file_size;
  };
  std::vector<Torn> torn;
  for (const auto& [pid, paths] : jitdumps) {
    for (const std::string& path : paths) {
      JitdumpTail tail;
      Result<std::vector<uint8_t>> bytes = ReadJitdump(path, pid, wait, &tail);
      if (!bytes) {
        warnings->push_back(bytes.error().message);
        continue;
      }
      if (tail.torn) {
        torn.push_back({path, pid, tail, bytes->size()});
        if (tail.complete_end == 0) continue;  // not even the header is whole
        bytes->resize(tail.complete_end);
      }
      keep(format::BlobKind::kJitdump, pid, path, std::move(*bytes));
    }
  }
  for (uint32_t pid : pids) {
    std::string path = "/tmp/perf-" + std::to_string(pid) + ".map";
    Result<std::vector<uint8_t>> bytes = ReadOwnedFile(path, pid);
    if (bytes) {
      keep(format::BlobKind::kPerfMap, pid, path, std::move(*bytes));
    } else if (bytes.error().code != Errc::kNotFound) {
      warnings->push_back(bytes.error().message);
    }
  }
  const long long waited = std::chrono::duration_cast<std::chrono::milliseconds>(wait.limit).count();
  for (const Torn& t : torn) {
    const std::string map_path = "/tmp/perf-" + std::to_string(t.pid) + ".map";
    const format::BlobChunk* map = nullptr;
    for (const format::BlobChunk& blob : blobs) {
      if (blob.kind == format::BlobKind::kPerfMap && blob.pid == t.pid) map = &blob;
    }
    const uint64_t left = t.file_size - t.tail.complete_end;
    std::string where =
        t.tail.complete_end == 0
            ? "the header (" + std::to_string(t.file_size) + " bytes)"
            : "the last record (offset " + std::to_string(t.tail.complete_end) + ": " +
                  std::to_string(left) + " of " +
                  (t.tail.torn_size != 0 ? std::to_string(t.tail.torn_size) + " bytes"
                                         : "its bytes, its size not yet written") + ")";
    std::string kept = t.tail.complete_end == 0
                           ? "not captured"
                           : "kept its " + std::to_string(t.tail.records) +
                                 (t.tail.records == 1 ? " whole record (" : " whole records (") +
                                 std::to_string(t.tail.complete_end) + " bytes)";
    const std::vector<format::TornJitCode> missing =
        map != nullptr ? MissingCode(t.tail, *map) : std::vector<format::TornJitCode>{};
    warnings->push_back(t.path + ": " + where + " was still being written when the capture ended " +
                        "and " + std::to_string(waited) + " ms later; " + kept +
                        ". Code logged from there on has no bytes, so running it decodes as a " +
                        "missing-code gap; " + NameMissingCode(missing, map != nullptr, map_path));
    if (torn_out == nullptr) continue;
    // The same facts for the archive (metadata jit.torn.<n>.*): a decoder says why the gap is.
    format::TornJitdump described;
    described.pid = t.pid;
    described.jitdump = t.path;
    described.bytes_kept = t.tail.complete_end;
    described.bytes_lost = left;
    described.record_size = t.tail.torn_size;
    described.records_kept = t.tail.records;
    described.waited_ms = static_cast<uint64_t>(waited);
    if (map != nullptr) described.perf_map = map_path;
    described.code_count = missing.size();
    const size_t listed = std::min(missing.size(), format::kMaxTornJitCode);
    described.code.assign(missing.end() - static_cast<std::ptrdiff_t>(listed), missing.end());
    torn_out->push_back(std::move(described));
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
