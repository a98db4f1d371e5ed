// SectionCache (see section_cache.h).
#include "section_cache.h"

#include <llvm/Object/BuildID.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/xxhash.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ptscope::symbols {
namespace {

constexpr char kMagic[8] = {'P', 'T', 'S', 'C', 'D', 'S', 'E', 'C'};
constexpr size_t kHeaderSize = 32;

void PutU64(char* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(value >> (8 * i));
}
uint64_t GetU64(const char* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t(static_cast<unsigned char>(in[i])) << (8 * i);
  return value;
}

void Header(char* out, SectionCache::Source source, uint64_t decompressed_size) {
  std::memcpy(out, kMagic, sizeof kMagic);
  PutU64(out + 8, source.size);
  PutU64(out + 16, source.hash);
  PutU64(out + 24, decompressed_size);
}

// A directory only we may write to: the cache's bytes are parsed as DWARF.
bool Private(const std::string& dir) {
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// `dir` and its missing parents, each made 0700; true when `dir` ends up private.
bool MakePrivateDir(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return false;
    if (slash == std::string::npos) break;
  }
  return Private(dir);
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t written = ::write(fd, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    data += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

}  // namespace

std::string BuildIdHex(const llvm::object::ObjectFile& object) {
  // LLVM's note reader checks p_offset + p_filesz against the file size, a sum a damaged header
  // can wrap (see ReadElfInfo): such a file gets no build id, so nothing of it is cached.
  if (const auto* elf = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(&object)) {
    auto headers = elf->getELFFile().program_headers();
    if (!headers) {
      llvm::consumeError(headers.takeError());
      return "";
    }
    const uint64_t file_size = object.getData().size();
    for (const auto& phdr : *headers) {
      if (phdr.p_type == llvm::ELF::PT_NOTE &&
          (phdr.p_offset > file_size || phdr.p_filesz > file_size - phdr.p_offset)) {
        return "";
      }
    }
  } else {
    return "";  // the only files decoded: x86-64 ELF
  }
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t byte : llvm::object::getBuildID(&object)) {
    hex += kDigits[byte >> 4];
    hex += kDigits[byte & 15];
  }
  return hex;
}

SectionCache SectionCache::FromEnvironment() {
  std::string dir;
  if (const char* explicit_dir = std::getenv("PTSCOPE_DEBUG_CACHE")) {
    dir = explicit_dir;
    if (dir == "off") dir.clear();
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    dir = std::string(xdg) + "/ptscope/debug-sections";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    dir = std::string(home) + "/.cache/ptscope/debug-sections";
  }
  if (!dir.empty() && !MakePrivateDir(dir)) dir.clear();
  return SectionCache(dir);
}

std::string SectionCache::PathOf(const std::string& build_id, llvm::StringRef section) const {
  // Both parts become file names: a build id is hex, a section name is kept to [A-Za-z0-9_.].
  if (build_id.empty() || build_id.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return "";
  }
  section = section.ltrim('.');
  if (section.empty() || section.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                                   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") !=
                             llvm::StringRef::npos) {
    return "";
  }
  return dir_ + "/" + build_id + "/" + section.str();
}

SectionCache::Source SectionCache::SourceOf(llvm::StringRef bytes) {
  return Source{bytes.size(), llvm::xxh3_64bits(bytes)};
}

std::optional<SectionCache::Hit> SectionCache::Find(const std::string& build_id,
                                                    llvm::StringRef section,
                                                    llvm::StringRef compressed) const {
  if (!enabled()) return std::nullopt;
  // (no file: not worth hashing the section)
  const std::string path = PathOf(build_id, section);
  if (path.empty() || ::access(path.c_str(), F_OK) != 0) return std::nullopt;
  return Find(build_id, section, SourceOf(compressed));
}

void SectionCache::Store(const std::string& build_id, llvm::StringRef section,
                         llvm::StringRef compressed, llvm::StringRef decompressed) const {
  if (!enabled()) return;
  Store(build_id, section, SourceOf(compressed), decompressed);
}

std::optional<SectionCache::Hit> SectionCache::Find(const std::string& build_id,
                                                    llvm::StringRef section,
                                                    Source source) const {
  if (!enabled()) return std::nullopt;
  std::string path = PathOf(build_id, section);
  if (path.empty()) return std::nullopt;
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file) return std::nullopt;
  llvm::StringRef bytes = (*file)->getBuffer();
  if (bytes.size() < kHeaderSize) return std::nullopt;
  char expected[kHeaderSize];
  Header(expected, source, GetU64(bytes.data() + 24));
  if (std::memcmp(expected, bytes.data(), kHeaderSize) != 0 ||
      bytes.size() - kHeaderSize != GetU64(bytes.data() + 24)) {
    return std::nullopt;
  }
  return Hit{std::move(*file), bytes.drop_front(kHeaderSize)};
}

void SectionCache::Store(const std::string& build_id, llvm::StringRef section, Source source,
                         llvm::StringRef decompressed) const {
  if (!enabled()) return;
  std::string path = PathOf(build_id, section);
  if (path.empty()) return;
  std::string dir = dir_ + "/" + build_id;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return;
  std::string temp = dir + "/.tmp.XXXXXX";
  int fd = ::mkstemp(temp.data());  // 0600
  if (fd < 0) return;
  char header[kHeaderSize];
  Header(header, source, decompressed.size());
  bool ok = WriteAll(fd, header, kHeaderSize) &&
            WriteAll(fd, decompressed.data(), decompressed.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) ::unlink(temp.c_str());
}

}  // namespace ptscope::symbols
