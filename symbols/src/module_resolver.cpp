// Finding a module's code and debug files by build id (order documented in symbols.h).
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string_view>
#include <system_error>

#include "ptscope/symbols.h"

namespace ptscope::symbols {
namespace fs = std::filesystem;
namespace {

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

bool HasElfMagic(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char magic[4] = {};
  ssize_t got = ::read(fd, magic, sizeof magic);
  ::close(fd);
  return got == 4 && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F';
}

// ".build-id/xx/rest" relative path of a build id (empty for ids shorter than 2 bytes).
std::string BuildIdRelative(const std::string& hex) {
  if (hex.size() < 4) return {};
  return ".build-id/" + hex.substr(0, 2) + "/" + hex.substr(2);
}

}  // namespace

ModuleResolver::ModuleResolver(std::vector<std::string> symbol_dirs)
    : symbol_dirs_(std::move(symbol_dirs)) {}

ModuleResolver::~ModuleResolver() {
  if (!temp_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(temp_dir_, ec);
  }
  if (temp_dir_lock_ >= 0) ::close(temp_dir_lock_);
}

void ModuleResolver::Note(std::string note) {
  for (const std::string& existing : notes_) {
    if (existing == note) return;
  }
  notes_.push_back(std::move(note));
}

// A resolver's temp dir carries an exclusive flock on the directory itself for the resolver's
// life. The kernel drops a flock when the last descriptor of it closes, which happens however the
// process ends (SIGKILL, OOM kill, a fleet worker stopped), so a dir whose lock anyone can take
// belongs to nobody: the next resolver removes it. A live dir is never taken, even from another
// PID namespace sharing /tmp, because the lock, not a pid, says who owns it. Dirs are locked under
// a staging name and renamed into kTempDirPrefix only once locked, so a sweep never meets one
// between creation and locking.
namespace {
constexpr std::string_view kTempDirPrefix = "ptscope-embedded-";
constexpr std::string_view kStagingPrefix = "ptscope-embedding-";

void RemoveAbandonedTempDirs(const std::string& base) {
  DIR* dir = ::opendir(base.c_str());
  if (dir == nullptr) return;
  while (const dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name.substr(0, kTempDirPrefix.size()) != kTempDirPrefix) continue;
    int fd = ::openat(::dirfd(dir), entry->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_uid == ::geteuid() && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      std::error_code ec;
      fs::remove_all(base + "/" + entry->d_name, ec);
    }
    ::close(fd);  // drops the lock taken for the removal
  }
  ::closedir(dir);
}
}  // namespace

bool ModuleResolver::EnsureTempDir() {
  if (!temp_dir_.empty()) return true;
  const char* env = std::getenv("TMPDIR");
  const std::string base = env != nullptr && *env != 0 ? env : "/tmp";
  RemoveAbandonedTempDirs(base);
  std::string staging = base + "/" + std::string(kStagingPrefix) + "XXXXXX";
  if (::mkdtemp(staging.data()) == nullptr) {
    Note("cannot create a temporary directory under " + base +
         " for embedded binaries; set TMPDIR to a writable directory");
    return false;
  }
  temp_dir_ = staging;
  // Where the file system cannot lock a directory (some network file systems), the dir keeps its
  // staging name, which no sweep touches: removed by the destructor only, as before locks. So it
  // does where the name is taken; only a kill in this instant would leave a staging dir behind.
  int lock = ::open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock < 0) return true;
  if (::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock);
    return true;
  }
  temp_dir_lock_ = lock;
  std::string named = base + "/" + std::string(kTempDirPrefix) +
                      staging.substr(staging.size() - 6);
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, named.c_str(), RENAME_NOREPLACE) == 0) {
    temp_dir_ = named;
  }
  return true;
}

std::string ModuleResolver::WriteTemp(const std::string& name, const std::vector<uint8_t>& data) {
  if (!EnsureTempDir()) return {};
  std::string path = temp_dir_ + "/" + name;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    Note("cannot write " + path + " (embedded binary)");
    return {};
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t wrote = ::write(fd, data.data() + done, data.size() - done);
    if (wrote <= 0) break;
    done += static_cast<size_t>(wrote);
  }
  ::close(fd);
  if (done != data.size()) {
    Note("short write to " + path + " (embedded binary); is the disk full?");
    return {};
  }
  return path;
}

Status ModuleResolver::AddBlob(const format::BlobChunk& blob) {
  auto data = std::make_shared<const std::vector<uint8_t>>(blob.data);
  return AddBlob(blob, [data]() -> Result<std::vector<uint8_t>> { return *data; });
}

Status ModuleResolver::AddBlob(const format::BlobChunk& blob, BlobLoader load) {
  std::string hex = format::ToHex(blob.build_id);
  switch (blob.kind) {
    case format::BlobKind::kElf:
      if (!hex.empty()) embedded_code_[hex] = Embedded{std::move(load), {}, false};
      break;
    case format::BlobKind::kDebugInfo:
      if (!hex.empty()) embedded_debug_[hex] = Embedded{std::move(load), {}, false};
      break;
    case format::BlobKind::kVdso: {
      Result<std::vector<uint8_t>> data = load();
      if (!data) {
        Note("embedded vdso of pid " + std::to_string(blob.pid) + " not used: " +
             data.error().message);
        break;
      }
      std::string path = WriteTemp("vdso-" + std::to_string(blob.pid) + ".so", *data);
      if (!path.empty()) vdso_by_pid_[blob.pid] = path;
      break;
    }
    default:
      break;
  }
  return Ok();
}

std::string ModuleResolver::EmbeddedPath(std::map<std::string, Embedded>& blobs,
                                         const std::string& hex, const char* suffix) {
  auto it = hex.empty() ? blobs.end() : blobs.find(hex);
  if (it == blobs.end()) return {};
  Embedded& blob = it->second;
  if (!blob.tried) {
    blob.tried = true;
    Result<std::vector<uint8_t>> data = blob.load();
    if (!data) {
      Note("embedded copy of build id " + hex + " not used: " + data.error().message);
    } else {
      blob.path = WriteTemp(hex + suffix, *data);
    }
  }
  return blob.path;
}

std::string ModuleResolver::VdsoPath(uint32_t pid) const {
  auto it = vdso_by_pid_.find(pid);
  if (it != vdso_by_pid_.end()) return it->second;
  // All processes of one host map the same vdso bytes.
  return vdso_by_pid_.empty() ? std::string() : vdso_by_pid_.begin()->second;
}

std::optional<ModuleResolver::Candidate> ModuleResolver::Probe(
    const std::string& path, const std::vector<uint8_t>& build_id, bool report_mismatch) {
  if (path.empty() || !IsRegularFile(path)) return std::nullopt;
  Result<ElfInfo> elf = ReadElfInfo(path);
  if (!elf) {
    // Raw code bytes (no ELF) are usable only when the capture did not name a build id.
    if (build_id.empty()) return Candidate{path, ElfInfo{}};
    return std::nullopt;
  }
  if (!build_id.empty() && elf->build_id != build_id) {
    if (report_mismatch) NoteRefused(path, elf->build_id, path, build_id);
    return std::nullopt;
  }
  return Candidate{path, std::move(*elf)};
}

void ModuleResolver::NoteRefused(const std::string& path, const std::vector<uint8_t>& file_id,
                                 const std::string& recorded_path,
                                 const std::vector<uint8_t>& build_id) {
  std::string has = file_id.empty() ? "no build id" : "build id " + format::ToHex(file_id);
  if (path == recorded_path) {
    Note("refused " + path + ": " + has + ", but the capture recorded build id " +
         format::ToHex(build_id) + " for it (a rebuilt binary: its addresses do not match)");
  } else {
    Note("refused " + path + ": " + has + ", but the capture's " + recorded_path +
         " has build id " + format::ToHex(build_id) + " (another build: its addresses do not "
         "match)");
  }
}

// A file in --symbols named like the module (or like its debug file) but of another build is
// what a user who copied the wrong binary has: say so, naming both build ids.
void ModuleResolver::NoteRefusedByName(const std::string& recorded_path,
                                       const std::vector<uint8_t>& build_id) {
  if (symbol_dirs_.empty() || build_id.empty() || recorded_path.empty()) return;
  ScanSymbolDirs();
  std::string name = fs::path(recorded_path).filename().string();
  for (const std::string& candidate : {name, name + ".debug"}) {
    auto range = scanned_by_name_.equal_range(candidate);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second.second != build_id) {
        NoteRefused(it->second.first, it->second.second, recorded_path, build_id);
      }
    }
  }
}

void ModuleResolver::ScanSymbolDirs() {
  if (scanned_) return;
  scanned_ = true;
  for (const std::string& dir : symbol_dirs_) {
    std::error_code ec;
    fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
    if (ec) {
      Note("--symbols " + dir + ": cannot read the directory (" + ec.message() + ")");
      continue;
    }
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it->path().filename() == ".build-id") {
        it.disable_recursion_pending();  // looked up directly by name
        continue;
      }
      std::string path = it->path().string();
      if (!it->is_regular_file(ec) || !HasElfMagic(path)) continue;
      if (it->path().extension() == ".dwp") {  // packages have no build id: found by name
        scanned_dwp_.emplace(it->path().filename().string(), path);
        continue;
      }
      Result<ElfInfo> elf = ReadElfInfo(path);
      if (!elf) continue;
      scanned_by_name_.emplace(it->path().filename().string(), std::make_pair(path, elf->build_id));
      if (!elf->build_id.empty()) scanned_files_.emplace(format::ToHex(elf->build_id), path);
    }
  }
}

// .gnu_debuglink: the named file in the binary's directory, its .debug/ subdirectory and
// /usr/lib/debug/<directory> (gdb's order), for the directory of the file we read and of the
// recorded path, then in each --symbols directory. The CRC-32 in the link must match the file
// (and the build id, when known): a mismatch is a stale debug file, refused with a note.
std::string ModuleResolver::FindDebuglinkFile(const Candidate& code,
                                              const std::vector<uint8_t>& build_id,
                                              const std::string& recorded_path) {
  const std::string& link = code.elf.debuglink;
  if (link.empty() || link.find('/') != std::string::npos) return {};
  std::vector<fs::path> candidates;
  std::vector<fs::path> dirs = {fs::path(code.path).parent_path()};
  if (!recorded_path.empty()) dirs.push_back(fs::path(recorded_path).parent_path());
  for (const fs::path& dir : dirs) {
    candidates.push_back(dir / link);
    candidates.push_back(dir / ".debug" / link);
    candidates.push_back(fs::path("/usr/lib/debug") / dir.relative_path() / link);
  }
  for (const std::string& dir : symbol_dirs_) candidates.push_back(fs::path(dir) / link);
  for (const fs::path& candidate : candidates) {
    std::string path = candidate.lexically_normal().string();
    if (path == code.path) continue;
    auto found = Probe(path, build_id, true);
    if (!found) continue;
    Result<uint32_t> crc = FileCrc32(path);
    if (!crc) {
      Note(crc.error().message);
      continue;
    }
    if (*crc != code.elf.debuglink_crc) {
      char text[96];
      std::snprintf(text, sizeof text, ": CRC-32 0x%08x, but .gnu_debuglink in ", *crc);
      char want[32];
      std::snprintf(want, sizeof want, " wants 0x%08x", code.elf.debuglink_crc);
      Note("stale debug file " + path + text + code.path + want + "; not used");
      continue;
    }
    return found->path;
  }
  return {};
}

std::string ModuleResolver::FindDebugFile(const Candidate& code,
                                          const std::vector<uint8_t>& build_id,
                                          const std::string& recorded_path, std::string& origin) {
  std::string hex = format::ToHex(build_id);
  origin = "archive";
  if (std::string embedded = EmbeddedPath(embedded_debug_, hex, ".debug"); !embedded.empty()) {
    return embedded;
  }
  std::vector<std::string> dirs = symbol_dirs_;
  dirs.push_back("/usr/lib/debug");
  std::string relative = BuildIdRelative(hex);
  for (size_t i = 0; i < dirs.size() && !relative.empty(); ++i) {
    origin = i < symbol_dirs_.size() ? "--symbols " + dirs[i] : dirs[i];
    if (auto found = Probe(dirs[i] + "/" + relative + ".debug", build_id, true)) return found->path;
  }
  ScanSymbolDirs();
  auto range = scanned_files_.equal_range(hex);
  for (auto it = range.first; !hex.empty() && it != range.second; ++it) {
    // A separate debug file, or an unstripped copy of a stripped binary (same build id).
    auto found = Probe(it->second, build_id, false);
    bool better = found && found->elf.has_symtab &&
                  (found->elf.code_is_nobits || !code.elf.has_symtab ||
                   (found->elf.has_debug_info && !code.elf.has_debug_info));
    if (better && found->path != code.path) {
      origin = "--symbols";
      return found->path;
    }
  }
  if (std::string linked = FindDebuglinkFile(code, build_id, recorded_path); !linked.empty()) {
    origin = ".gnu_debuglink";
    return linked;
  }
  if (debuginfod_ != nullptr && !hex.empty() && !code.elf.has_debug_info) {
    Result<std::string> fetched = debuginfod_->FetchDebugInfo(build_id, recorded_path);
    if (fetched) {
      origin = "debuginfod";
      if (auto found = Probe(*fetched, build_id, true)) return found->path;
    } else if (fetched.error().code != Errc::kNotFound) {
      Note(fetched.error().message);
    }
  }
  if (!code.elf.has_symtab && !code.elf.has_debug_info) NoteRefusedByName(recorded_path, build_id);
  origin = "code file";
  return code.path;  // the binary itself: its symbol table (and DWARF, if not stripped)
}

// LLVM reads a DWARF package only as "<debug object>.dwp" (DWARFContext's default DWPName, one
// per LLVMSymbolizer), so a package next to the recorded binary or in a --symbols directory is
// missed whenever the debug object is a copy under another name (.build-id/xx/rest.debug, an
// archive copy, a renamed copy in --symbols). Such a pair is shown to LLVM through two symlinks
// in the temp dir, "<hex>.split" and "<hex>.split.dwp". LLVM itself rejects a package whose DWO
// ids do not match the skeleton units. (.dwo files are only looked up at DW_AT_comp_dir.)
std::string ModuleResolver::AttachDwp(const std::string& debug_path, const std::string& hex,
                                      const std::string& recorded_path,
                                      const std::string& code_path, std::string& dwp_path) {
  if (debug_path.empty()) return debug_path;
  if (IsRegularFile(debug_path + ".dwp")) {
    dwp_path = debug_path + ".dwp";
    return debug_path;
  }
  std::vector<std::string> candidates;
  if (!recorded_path.empty()) candidates.push_back(recorded_path + ".dwp");
  candidates.push_back(code_path + ".dwp");
  std::string name = fs::path(recorded_path.empty() ? code_path : recorded_path).filename().string();
  if (!symbol_dirs_.empty() && !name.empty()) {
    for (const std::string& dir : symbol_dirs_) candidates.push_back(dir + "/" + name + ".dwp");
    ScanSymbolDirs();
    if (auto it = scanned_dwp_.find(name + ".dwp"); it != scanned_dwp_.end()) {
      candidates.push_back(it->second);
    }
  }
  for (const std::string& dwp : candidates) {
    if (!IsRegularFile(dwp) || !EnsureTempDir()) continue;
    std::error_code ec;
    std::string link = temp_dir_ + "/" + (hex.empty() ? std::string("nobuildid") : hex) + ".split";
    if (fs::is_symlink(link + ".dwp", ec)) {  // same build id, attached before
      dwp_path = fs::read_symlink(link + ".dwp", ec).string();
      return link;
    }
    fs::create_symlink(fs::absolute(debug_path, ec), link, ec);
    if (!ec) fs::create_symlink(fs::absolute(dwp, ec), link + ".dwp", ec);
    if (ec) {
      Note("cannot link the DWARF package " + dwp + " for " + debug_path + " (" + ec.message() +
           "); inlined frames and lines of split DWARF units are missing");
      return debug_path;
    }
    dwp_path = fs::absolute(dwp, ec).string();
    return link;
  }
  return debug_path;
}

const ModuleFiles& ModuleResolver::Resolve(const std::string& recorded_path,
                                           const std::vector<uint8_t>& build_id) {
  std::string hex = format::ToHex(build_id);
  std::string key = recorded_path + '\0' + hex;
  auto cached = cache_.find(key);
  if (cached != cache_.end()) return cached->second;

  std::optional<Candidate> code;
  std::string origin;
  if (std::string embedded = EmbeddedPath(embedded_code_, hex, ".elf"); !embedded.empty()) {
    code = Probe(embedded, build_id, true);
    origin = "archive";
  }
  if (!code) {
    code = Probe(recorded_path, build_id, true);
    origin = "recorded path";
  }
  std::string relative = BuildIdRelative(hex);
  for (size_t i = 0; !code && !relative.empty() && i < symbol_dirs_.size(); ++i) {
    code = Probe(symbol_dirs_[i] + "/" + relative, build_id, true);
    origin = "--symbols " + symbol_dirs_[i];
  }
  if (!code && !hex.empty()) {
    ScanSymbolDirs();
    auto range = scanned_files_.equal_range(hex);
    for (auto it = range.first; !code && it != range.second; ++it) {
      code = Probe(it->second, build_id, false);
      if (code && code->elf.code_is_nobits) code.reset();  // a debug file has no code bytes
      origin = "--symbols";
    }
  }
  if (!code && !hex.empty() && debuginfod_ != nullptr) {  // last: it may use the network
    Result<std::string> fetched = debuginfod_->FetchExecutable(build_id, recorded_path);
    if (fetched) {
      code = Probe(*fetched, build_id, true);
      origin = "debuginfod";
    } else if (fetched.error().code != Errc::kNotFound) {
      Note(fetched.error().message);
    }
  }
  ModuleFiles files;
  if (!code) NoteRefusedByName(recorded_path, build_id);
  if (code) {
    files.debug_path = FindDebugFile(*code, build_id, recorded_path, files.debug_origin);
    files.debug_path =
        AttachDwp(files.debug_path, hex, recorded_path, code->path, files.dwp_path);
    files.code_path = code->path;
    files.code_elf = std::move(code->elf);
    files.code_origin = origin;
  }
  return cache_.emplace(std::move(key), std::move(files)).first->second;
}

}  // namespace ptscope::symbols
