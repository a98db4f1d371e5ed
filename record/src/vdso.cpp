#include "vdso.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ptscope/file_read.h"

namespace ptscope::record {

namespace {
constexpr uint64_t kMaxVdsoBytes = 1ull << 20;  // real vdsos are 8 KiB; refuse odd mappings
}

Result<std::vector<uint8_t>> ReadProcessMemory(int pid, uint64_t address, uint64_t size) {
  std::string path = ProcDir(pid) + "/mem";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return MakeError(err == ENOENT ? Errc::kNotFound : Errc::kPermission,
                     path + ": cannot open: " + std::strerror(err) +
                         " (reading another process's memory needs root or CAP_SYS_PTRACE)");
  }
  std::vector<uint8_t> bytes(size);
  const format::FileRead read = format::ReadFileAt(fd, address, bytes.size(), bytes.data());
  close(fd);
  if (read.bytes < bytes.size()) {
    const int err = read.error != 0 ? read.error : EIO;
    char where[32];
    std::snprintf(where, sizeof where, "0x%llx", static_cast<unsigned long long>(address + read.bytes));
    return MakeError(err == EPERM || err == EACCES ? Errc::kPermission : Errc::kIo,
                     path + ": read at " + where + " failed: " + std::strerror(err));
  }
  return bytes;
}

Result<VdsoImage> ReadVdso(int pid, const std::vector<MapEntry>& maps) {
  const MapEntry* vdso = FindVdso(maps);
  if (vdso == nullptr)
    return MakeError(Errc::kNotFound, ProcDir(pid) + "/maps: the process has no [vdso] mapping");
  if (vdso->size() == 0 || vdso->size() > kMaxVdsoBytes)
    return MakeError(Errc::kCorrupt, ProcDir(pid) + "/maps: [vdso] mapping of " +
                                         std::to_string(vdso->size()) + " bytes is implausible");
  VdsoImage image;
  image.vaddr = vdso->start;
  PTSCOPE_ASSIGN_OR_RETURN(image.bytes, ReadProcessMemory(pid, vdso->start, vdso->size()));
  return image;
}

}  // namespace ptscope::record
