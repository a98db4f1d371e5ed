// Code bytes for libipt: every mapped module resolved once into an image-section cache that all
// the decoders of one worker share (the pipeline keeps one per worker: see pipeline.cpp), and
// per-thread images that follow the process's address space over time (one image per epoch;
// a new epoch starts whenever a mapping of the process begins or ends).
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capture/sideband_timeline.h"
#include "capture/streams.h"
#include "flow/query_walker.h"
#include "ptscope/decode.h"
#include "ptscope/symbols.h"

namespace ptscope::decode {

// Shared by all decoding threads; immutable after Prepare().
class CodeImages {
 public:
  CodeImages(const symbols::AddressSpace& address_space, symbols::ModuleResolver& resolver);
  ~CodeImages();
  CodeImages(const CodeImages&) = delete;
  CodeImages& operator=(const CodeImages&) = delete;

  // One prepared CodeImages per decode worker (each its own section cache: see the .cpp), for
  // the processes of `streams` and of the CPU schedule.
  static std::vector<std::unique_ptr<CodeImages>> ForWorkers(
      unsigned workers, const SidebandTimeline& timeline, const std::vector<Stream>& streams,
      symbols::ModuleResolver& resolver, const symbols::JitCodeStore& jit);

  // JIT code (jitdump bytes) served to libipt through a read callback; set before Prepare().
  void SetJitCode(const symbols::JitCodeStore* jit) { jit_ = jit; }
  const symbols::JitCodeStore* jit() const { return jit_; }

  // Resolves every module of `pids` and adds its executable sections to the cache.
  void Prepare(const std::vector<uint32_t>& pids);
  pt_image_section_cache* iscache() const { return iscache_; }
  const std::vector<MissingModule>& missing() const { return missing_; }
  // Those of missing() with a mapping (of any process) holding one of `ips`: the modules whose
  // code ran and made missing-code gaps.
  std::vector<MissingModule> MissingThatRan(const std::vector<uint64_t>& ips) const;

  // Section ids of `pid`'s mappings valid at `time_ns`; *next_change receives the next time at
  // which that set changes (UINT64_MAX when never).
  std::vector<int> SectionsAt(uint32_t pid, uint64_t time_ns, uint64_t* next_change) const;
  // The file bytes of section `isid` (mapped once), from the address it was added at; null
  // when not mapped (then ask libipt's cache).
  const uint8_t* SectionBytes(int isid) const {
    return static_cast<size_t>(isid) < section_bytes_.size() ? section_bytes_[isid] : nullptr;
  }
  // The addresses [first, second) a section of the cache was added for.
  std::pair<uint64_t, uint64_t> SectionRange(int isid) const {
    return static_cast<size_t>(isid) < section_ranges_.size() ? section_ranges_[isid]
                                                             : std::pair<uint64_t, uint64_t>{};
  }

 private:
  const symbols::AddressSpace& address_space_;
  symbols::ModuleResolver& resolver_;
  pt_image_section_cache* iscache_ = nullptr;
  std::map<uint32_t, std::vector<int>> isid_by_pid_;  // parallel to MappingsOf(pid); -1 missing
  std::vector<std::pair<uint64_t, uint64_t>> section_ranges_;  // by isid
  // The walker's instruction bytes straight from the code files: pt_iscache_read maps and
  // unmaps the section under two mutexes per call, ~800 instructions per instruction decoded.
  const uint8_t* MapFile(const std::string& path, uint64_t size);
  std::vector<const uint8_t*> section_bytes_;  // by isid: the byte at section_ranges_[isid].first
  std::map<std::string, std::pair<void*, size_t>> file_maps_;  // path -> whole-file mapping
  std::vector<MissingModule> missing_;
  const symbols::JitCodeStore* jit_ = nullptr;
};

// Code of one epoch as libipt's image sees it: sections added later replace the parts of earlier
// ones they overlap, so the epoch is a sorted list of disjoint address ranges.
struct CodeInterval {
  uint64_t begin = 0, end = 0;
  int isid = 0;
};

// One decoder's view: owns the pt_image of the current epoch.
class ThreadImage {
 public:
  ThreadImage(const CodeImages& images, uint32_t pid) : images_(images), pid_(pid) {}
  ~ThreadImage();
  ThreadImage(const ThreadImage&) = delete;
  ThreadImage& operator=(const ThreadImage&) = delete;

  // The image for `time_ns`; a new one when the epoch changed (the old one stays alive until the
  // next switch so a decoder can still point at it). `changed` says whether to re-set it.
  pt_image* At(uint64_t time_ns, bool* changed);
  // The current epoch's code (see CodeInterval), sorted by address; valid after At().
  const std::vector<CodeInterval>& intervals() const { return intervals_; }
  // Cheap check for the hot path: whether At(time_ns) would switch.
  pt_image_section_cache* iscache() const { return images_.iscache(); }
  const CodeImages& images() const { return images_; }
  // The process whose address space this image follows.
  uint32_t pid() const { return pid_; }
  // Per-CPU decoding: another process now runs; the next At() builds its image.
  void SetPid(uint32_t pid) {
    if (pid == pid_) return;
    pid_ = pid;
    next_change_ = 0;
  }
  // The decoder's current time: which version of JIT code the read callback serves.
  void SetTime(uint64_t time_ns) { time_ns_ = time_ns; }
  // JIT code bytes at `ip` (for instructions libipt read through the callback); 0 if none.
  size_t ReadJit(uint8_t* buffer, size_t size, uint64_t ip) const;
  // The version of the JIT code ReadJit reads at `ip` (symbols::JitCodeStore::CodeVersion).
  uint64_t JitVersion(uint64_t ip) const;
  // Length of the instruction at `ip` inside `block` (its section, else JIT code); 0 when its
  // bytes cannot be read or decoded.
  uint8_t InsnLength(const pt_block& block, uint64_t ip) const;
  bool NeedsSwitch(uint64_t time_ns) const {
    return image_ == nullptr || time_ns >= next_change_ || time_ns < epoch_start_;
  }

 private:
  const CodeImages& images_;
  uint32_t pid_;
  pt_image* image_ = nullptr;
  pt_image* previous_ = nullptr;
  std::vector<CodeInterval> intervals_;
  uint64_t epoch_start_ = 0;
  uint64_t next_change_ = 0;
  uint64_t time_ns_ = UINT64_MAX;  // unknown: the JIT store picks the nearest version
};

// QueryWalker's code: the thread image's current epoch (its sections, then JIT code).
class ThreadImageCode : public WalkerCode {
 public:
  explicit ThreadImageCode(const ThreadImage& image) : image_(image) {}
  bool Locate(uint64_t ip, int* isid, uint64_t* begin, uint64_t* end) override;
  int Read(uint64_t ip, uint8_t* buffer, size_t size, int* isid, uint64_t* section_end) override;
  const uint8_t* Bytes(uint64_t ip, int* isid, uint64_t* section_end) override;
  uint64_t CallbackVersion(uint64_t ip) override { return image_.JitVersion(ip); }

 private:
  const ThreadImage& image_;
};

}  // namespace ptscope::decode
