#include "proc_maps.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace ptscope::record {
namespace {

constexpr std::string_view kDeletedSuffix = " (deleted)";

// Cursor over one maps line; every field read advances it.
class LineCursor {
 public:
  explicit LineCursor(std::string_view line) : line_(line) {}

  bool ReadHex(uint64_t* out) {
    const char* begin = line_.data() + pos_;
    const char* end = line_.data() + line_.size();
    auto [ptr, ec] = std::from_chars(begin, end, *out, 16);
    if (ec != std::errc() || ptr == begin) return false;
    pos_ += static_cast<size_t>(ptr - begin);
    return true;
  }
  bool ReadDec(uint64_t* out) {
    const char* begin = line_.data() + pos_;
    const char* end = line_.data() + line_.size();
    auto [ptr, ec] = std::from_chars(begin, end, *out, 10);
    if (ec != std::errc() || ptr == begin) return false;
    pos_ += static_cast<size_t>(ptr - begin);
    return true;
  }
  bool Expect(char c) {
    if (pos_ >= line_.size() || line_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  // Skips at least one space.
  bool SkipSpaces() {
    size_t start = pos_;
    while (pos_ < line_.size() && line_[pos_] == ' ') ++pos_;
    return pos_ > start;
  }
  std::string_view Take(size_t n) {
    if (pos_ + n > line_.size()) return {};
    std::string_view s = line_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string_view Rest() const { return line_.substr(std::min(pos_, line_.size())); }
  bool AtEnd() const { return pos_ >= line_.size(); }

 private:
  std::string_view line_;
  size_t pos_ = 0;
};

Result<MapEntry> ParseLine(std::string_view line, std::string_view source, size_t line_number) {
  auto bad = [&](const char* field) {
    return MakeError(Errc::kCorrupt, std::string(source) + ":" + std::to_string(line_number) +
                                         ": cannot parse the " + field + " field of '" +
                                         std::string(line) + "'");
  };
  LineCursor cur(line);
  MapEntry entry;
  if (!cur.ReadHex(&entry.start) || !cur.Expect('-') || !cur.ReadHex(&entry.end) ||
      entry.end < entry.start)
    return bad("address range");
  if (!cur.SkipSpaces()) return bad("perms");
  std::string_view perms = cur.Take(4);
  if (perms.size() != 4) return bad("perms");
  entry.read = perms[0] == 'r';
  entry.write = perms[1] == 'w';
  entry.exec = perms[2] == 'x';
  entry.shared = perms[3] == 's';
  uint64_t major = 0, minor = 0;
  if (!cur.SkipSpaces() || !cur.ReadHex(&entry.offset)) return bad("offset");
  if (!cur.SkipSpaces() || !cur.ReadHex(&major) || !cur.Expect(':') || !cur.ReadHex(&minor))
    return bad("dev");
  entry.dev_major = static_cast<uint32_t>(major);
  entry.dev_minor = static_cast<uint32_t>(minor);
  if (!cur.SkipSpaces() || !cur.ReadDec(&entry.inode)) return bad("inode");
  // The path is everything after the padding; it may itself contain spaces.
  if (!cur.AtEnd() && !cur.SkipSpaces()) return bad("path");
  std::string_view path = cur.Rest();
  if (path.size() >= kDeletedSuffix.size() &&
      path.substr(path.size() - kDeletedSuffix.size()) == kDeletedSuffix) {
    entry.deleted = true;
    path.remove_suffix(kDeletedSuffix.size());
  }
  entry.path = std::string(path);
  return entry;
}

}  // namespace

uint32_t MapEntry::prot() const {
  return (read ? PROT_READ : 0) | (write ? PROT_WRITE : 0) | (exec ? PROT_EXEC : 0);
}

Result<std::vector<MapEntry>> ParseProcMaps(std::string_view text, std::string_view source) {
  std::vector<MapEntry> entries;
  size_t line_number = 0;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    ++line_number;
    if (line.empty()) continue;
    PTSCOPE_ASSIGN_OR_RETURN(MapEntry entry, ParseLine(line, source, line_number));
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::string ProcDir(int pid) { return pid == 0 ? "/proc/self" : "/proc/" + std::to_string(pid); }

Result<std::string> ReadProcFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    Errc code = ErrcFromErrno(err);
    return MakeError(code, path + ": " + std::strerror(err));
  }
  std::string text;
  char buffer[8192];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return MakeError(Errc::kIo, path + ": read failed: " + std::strerror(err));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

Result<std::vector<MapEntry>> ReadProcMaps(int pid) {
  std::string path = ProcDir(pid) + "/maps";
  PTSCOPE_ASSIGN_OR_RETURN(std::string text, ReadProcFile(path));
  return ParseProcMaps(text, path);
}

Result<std::vector<int>> ListThreads(int pid) {
  std::string path = ProcDir(pid) + "/task";
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) {
    int err = errno;
    return MakeError(err == ENOENT ? Errc::kNotFound : Errc::kPermission,
                     path + ": " + std::strerror(err) + " (is the process still running?)");
  }
  std::vector<int> tids;
  while (dirent* ent = readdir(dir)) {
    int tid = 0;
    std::string_view name = ent->d_name;
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), tid);
    if (ec == std::errc() && ptr == name.data() + name.size() && tid > 0) tids.push_back(tid);
  }
  closedir(dir);
  if (tids.empty()) return MakeError(Errc::kNotFound, path + ": no threads (the process exited)");
  std::sort(tids.begin(), tids.end());
  return tids;
}

Result<std::vector<int>> OnlineCpus() {
  PTSCOPE_ASSIGN_OR_RETURN(std::string text, ReadProcFile("/sys/devices/system/cpu/online"));
  std::vector<int> cpus;
  int first = -1, value = 0;
  bool in_number = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      value = value * 10 + (c - '0');
      in_number = true;
      continue;
    }
    if (in_number && c == '-') {
      first = value;
    } else if (in_number) {
      for (int cpu = first < 0 ? value : first; cpu <= value; ++cpu) cpus.push_back(cpu);
      first = -1;
    }
    value = 0;
    in_number = false;
  }
  if (in_number)
    for (int cpu = first < 0 ? value : first; cpu <= value; ++cpu) cpus.push_back(cpu);
  if (cpus.empty())
    return MakeError(Errc::kCorrupt, "/sys/devices/system/cpu/online lists no CPU: '" + text + "'");
  return cpus;
}

std::vector<int> ListProcesses() {
  std::vector<int> pids;
  if (DIR* dir = opendir("/proc")) {
    while (dirent* ent = readdir(dir)) {
      int pid = 0;
      std::string_view name = ent->d_name;
      auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
      if (ec == std::errc() && ptr == name.data() + name.size() && pid > 0) pids.push_back(pid);
    }
    closedir(dir);
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

const MapEntry* FindVdso(const std::vector<MapEntry>& maps) {
  for (const MapEntry& m : maps)
    if (m.is_vdso()) return &m;
  return nullptr;
}

const MapEntry* FindMapping(const std::vector<MapEntry>& maps, uint64_t address) {
  for (const MapEntry& m : maps)
    if (address >= m.start && address < m.end) return &m;
  return nullptr;
}

Result<std::string> ProcessExePath(int pid) {
  std::string link = ProcDir(pid) + "/exe";
  char buf[4096];
  ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return MakeError(Errc::kPermission, link + ": " + std::strerror(errno));
  std::string path(buf, static_cast<size_t>(n));
  const std::string deleted = " (deleted)";
  if (path.size() > deleted.size() &&
      path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
    path.resize(path.size() - deleted.size());
  return path;
}

}  // namespace ptscope::record
