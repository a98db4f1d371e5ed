#include "process_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>


namespace ptscope::emulate {
namespace {

bool SameMapping(const record::MapEntry& a, const record::MapEntry& b) {
  return a.start == b.start && a.end == b.end && a.offset == b.offset && a.path == b.path &&
         a.prot() == b.prot() && a.inode == b.inode;
}

}  // namespace

ProcessState::~ProcessState() {
  if (mem_fd_ >= 0) close(mem_fd_);
}

Status ProcessState::OpenMemory() {
  if (mem_fd_ >= 0) close(mem_fd_);
  const std::string path = record::ProcDir(pid_) + "/mem";
  mem_fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (mem_fd_ < 0) {
    return MakeError(errno == EACCES || errno == EPERM ? Errc::kPermission : Errc::kIo,
                     "cannot open " + path + ": " + std::strerror(errno));
  }
  cache_.Invalidate();
  return Ok();
}

const ClassifiedInsn& ProcessState::Instruction(uint64_t ip) {
  if (const ClassifiedInsn* hit = cache_.Find(ip)) return *hit;
  uint8_t bytes[16] = {};
  ssize_t got = pread(mem_fd_, bytes, sizeof(bytes), static_cast<off_t>(ip));
  if (got <= 0) {  // the instruction may end right before an unmapped page: read up to it
    const uint64_t to_page_end = 4096 - (ip & 4095);
    got = pread(mem_fd_, bytes, std::min<uint64_t>(to_page_end, sizeof(bytes)),
                static_cast<off_t>(ip));
  }
  ClassifiedInsn insn;
  if (got > 0) insn = ClassifyInstruction(bytes, static_cast<size_t>(got), ip);
  return cache_.Insert(ip, insn);
}

Status ProcessState::RefreshMaps(record::CaptureWriter* writer, pid_t tid, uint64_t time_ns,
                                 bool all) {
  PTSCOPE_ASSIGN_OR_RETURN(auto fresh, record::ReadProcMaps(pid_));
  bool exec_changed = all;
  for (const auto& map : fresh) {
    const std::string jit_name = "jit-" + std::to_string(pid_) + ".dump";
    if (map.path.size() >= jit_name.size() &&
        map.path.compare(map.path.size() - jit_name.size(), jit_name.size(), jit_name) == 0 &&
        std::find(jitdumps_.begin(), jitdumps_.end(), map.path) == jitdumps_.end()) {
      jitdumps_.push_back(map.path);
    }
    if (!map.exec) continue;
    const bool known = !all && std::any_of(maps_.begin(), maps_.end(), [&](const auto& old) {
      return SameMapping(old, map);
    });
    if (known) continue;
    exec_changed = true;
    PTSCOPE_TRY(writer->AddMapping(static_cast<uint32_t>(pid_), static_cast<uint32_t>(tid), map,
                                   time_ns));
  }
  // An executable mapping that went away (munmap, mprotect -x) also invalidates decodes.
  for (const auto& old : maps_) {
    if (!old.exec) continue;
    if (std::none_of(fresh.begin(), fresh.end(), [&](const auto& m) { return SameMapping(old, m); }))
      exec_changed = true;
  }
  if (exec_changed) cache_.Invalidate();
  maps_ = std::move(fresh);
  return Ok();
}

bool ProcessState::SignalCaught(int signal) const {
  auto text = record::ReadProcFile(record::ProcDir(pid_) + "/status");
  if (!text) return false;
  const size_t at = text->find("SigCgt:");
  if (at == std::string::npos) return false;
  const uint64_t mask = std::strtoull(text->c_str() + at + 7, nullptr, 16);
  return signal >= 1 && signal <= 64 && ((mask >> (signal - 1)) & 1);
}

}  // namespace ptscope::emulate
