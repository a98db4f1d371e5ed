// Module resolution into libipt's shared section cache and per-thread image epochs.
#include "flow/code_images.h"

#include <Zydis/Zydis.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace ptscope::decode {
namespace {

// libipt asks here for bytes no section holds: JIT code from the jitdump, else -pte_nomap
// (a missing-code gap, e.g. for code known only from a perf map).
int ReadJitCallback(uint8_t* buffer, size_t size, const pt_asid*, uint64_t ip, void* context) {
  size_t read = static_cast<const ThreadImage*>(context)->ReadJit(buffer, size, ip);
  return read == 0 ? -pte_nomap : static_cast<int>(read);
}

}  // namespace

CodeImages::CodeImages(const symbols::AddressSpace& address_space,
                       symbols::ModuleResolver& resolver)
    : address_space_(address_space), resolver_(resolver), iscache_(pt_iscache_alloc("ptscope")) {}

CodeImages::~CodeImages() {
  pt_iscache_free(iscache_);
  for (auto& [path, map] : file_maps_) ::munmap(map.first, map.second);
}

const uint8_t* CodeImages::MapFile(const std::string& path, uint64_t size) {
  auto [it, inserted] = file_maps_.try_emplace(path, nullptr, 0);
  if (inserted) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    void* map = fd < 0 ? MAP_FAILED : ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (fd >= 0) ::close(fd);
    if (map != MAP_FAILED) it->second = {map, size};
  }
  // A file that grew since it was mapped: libipt's cache reads it instead.
  return it->second.second >= size ? static_cast<const uint8_t*>(it->second.first) : nullptr;
}

void CodeImages::Prepare(const std::vector<uint32_t>& pids) {
  std::map<uint32_t, bool> reported_missing;
  for (uint32_t pid : pids) {
    if (isid_by_pid_.count(pid) != 0) continue;
    std::vector<int>& isids = isid_by_pid_[pid];
    for (const symbols::Mapping& mapping : address_space_.MappingsOf(pid)) {
      const symbols::Module& module = address_space_.modules()[mapping.module];
      std::string code_path;
      if (module.path == "[vdso]") {
        code_path = resolver_.VdsoPath(pid);
      } else {
        code_path = resolver_.Resolve(module.path, module.build_id).code_path;
      }
      int isid = -1;
      struct stat st {};
      if (!code_path.empty() && ::stat(code_path.c_str(), &st) == 0 &&
          static_cast<uint64_t>(st.st_size) > mapping.pgoff) {
        uint64_t size = std::min<uint64_t>(mapping.end - mapping.start,
                                           static_cast<uint64_t>(st.st_size) - mapping.pgoff);
        isid = pt_iscache_add_file(iscache_, code_path.c_str(), mapping.pgoff, size,
                                   mapping.start);
        if (isid >= 0) {
          if (section_ranges_.size() <= static_cast<size_t>(isid)) section_ranges_.resize(isid + 1);
          section_ranges_[isid] = {mapping.start, mapping.start + size};
          if (section_bytes_.size() <= static_cast<size_t>(isid)) section_bytes_.resize(isid + 1);
          const uint8_t* file = MapFile(code_path, static_cast<uint64_t>(st.st_size));
          section_bytes_[isid] = file != nullptr ? file + mapping.pgoff : nullptr;
        }
      }
      // Anonymous memory holding JIT code gets its bytes from the jitdump instead.
      bool jit_memory = jit_ != nullptr && jit_->HasCode(pid) &&
                        (module.path.empty() || module.path.rfind("//anon", 0) == 0);
      // The jitdump's own marker page (mapped executable so recorders notice the file).
      const std::string& p = module.path;
      if (p.find("/jit-") != std::string::npos && p.size() > 5 && p.compare(p.size() - 5, 5, ".dump") == 0)
        jit_memory = true;
      if (isid < 0 && !jit_memory && !reported_missing[mapping.module]) {
        reported_missing[mapping.module] = true;
        missing_.push_back(MissingModule{module.path, module.build_id});
      }
      isids.push_back(isid);
    }
  }
}

std::vector<MissingModule> CodeImages::MissingThatRan(const std::vector<uint64_t>& ips) const {
  std::set<std::pair<std::string, std::vector<uint8_t>>> ran;
  for (const auto& [pid, isids] : isid_by_pid_) {
    const std::vector<symbols::Mapping>& mappings = address_space_.MappingsOf(pid);
    for (size_t i = 0; i < mappings.size() && i < isids.size(); ++i) {
      if (isids[i] >= 0) continue;
      for (uint64_t ip : ips) {
        if (ip < mappings[i].start || ip >= mappings[i].end) continue;
        const symbols::Module& module = address_space_.modules()[mappings[i].module];
        ran.emplace(module.path, module.build_id);
        break;
      }
    }
  }
  std::vector<MissingModule> result;
  for (const MissingModule& m : missing_) {
    if (ran.count({m.path, m.build_id}) != 0) result.push_back(m);
  }
  return result;
}

std::vector<int> CodeImages::SectionsAt(uint32_t pid, uint64_t time_ns,
                                        uint64_t* next_change) const {
  std::vector<int> sections;
  *next_change = UINT64_MAX;
  auto it = isid_by_pid_.find(pid);
  if (it == isid_by_pid_.end()) return sections;
  const std::vector<symbols::Mapping>& mappings = address_space_.MappingsOf(pid);
  std::vector<size_t> future;
  std::vector<std::pair<uint64_t, uint64_t>> covered;
  for (size_t i = 0; i < mappings.size() && i < it->second.size(); ++i) {
    const symbols::Mapping& mapping = mappings[i];
    if (mapping.valid_from > time_ns) {
      *next_change = std::min(*next_change, mapping.valid_from);
      if (mapping.valid_until > mapping.valid_from) future.push_back(i);
      continue;
    }
    if (mapping.valid_until <= time_ns) continue;
    *next_change = std::min(*next_change, mapping.valid_until);
    covered.emplace_back(mapping.start, mapping.end);
    if (it->second[i] >= 0) sections.push_back(it->second[i]);
  }
  // Sideband timestamps can trail the code they describe (records synthesized when tracing
  // starts, coarse clocks). A mapping that begins later but overlaps nothing in force now is
  // also given to libipt: addresses it covers have no other candidate.
  for (size_t i : future) {
    const symbols::Mapping& mapping = mappings[i];
    bool overlaps = false;
    for (const auto& [start, end] : covered) overlaps |= mapping.start < end && start < mapping.end;
    if (overlaps) continue;
    covered.emplace_back(mapping.start, mapping.end);
    if (it->second[i] >= 0) sections.push_back(it->second[i]);
  }
  return sections;
}

ThreadImage::~ThreadImage() {
  pt_image_free(image_);
  pt_image_free(previous_);
}

size_t ThreadImage::ReadJit(uint8_t* buffer, size_t size, uint64_t ip) const {
  const symbols::JitCodeStore* jit = images_.jit();
  return jit == nullptr ? 0 : jit->ReadCode(pid_, ip, time_ns_, buffer, size);
}

uint64_t ThreadImage::JitVersion(uint64_t ip) const {
  const symbols::JitCodeStore* jit = images_.jit();
  return jit == nullptr ? 0 : jit->CodeVersion(pid_, ip, time_ns_);
}

uint8_t ThreadImage::InsnLength(const pt_block& block, uint64_t ip) const {
  static const ZydisDecoder kLengths = [] {  // lengths only: Zydis's minimal mode
    ZydisDecoder zydis;
    ZydisDecoderInit(&zydis, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecoderEnableMode(&zydis, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
    return zydis;
  }();
  uint8_t bytes[16];
  int read = pt_iscache_read(iscache(), bytes, sizeof bytes, block.isid, ip);
  if (read <= 0) read = static_cast<int>(ReadJit(bytes, sizeof bytes, ip));
  ZydisDecodedInstruction insn;
  if (read <= 0 || ZYAN_FAILED(ZydisDecoderDecodeInstruction(
                       &kLengths, nullptr, bytes, static_cast<ZyanUSize>(read), &insn))) {
    return 0;
  }
  return insn.length;
}

pt_image* ThreadImage::At(uint64_t time_ns, bool* changed) {
  *changed = false;
  if (!NeedsSwitch(time_ns)) return image_;
  uint64_t next_change = UINT64_MAX;
  std::vector<int> sections = images_.SectionsAt(pid_, time_ns, &next_change);
  pt_image* image = pt_image_alloc(nullptr);
  if (images_.jit() != nullptr && images_.jit()->HasCode(pid_)) {
    pt_image_set_callback(image, ReadJitCallback, this);
  }
  // Later mappings were added later: adding in order lets a newer section replace an older one.
  for (int isid : sections) pt_image_add_cached(image, images_.iscache(), isid, nullptr);
  intervals_.clear();
  for (int isid : sections) {
    const auto [begin, end] = images_.SectionRange(isid);
    if (begin >= end) continue;
    // Paint [begin, end) over what is there: trim or drop the overlapped intervals.
    std::vector<CodeInterval> kept;
    for (const CodeInterval& old : intervals_) {
      if (old.end <= begin || end <= old.begin) {
        kept.push_back(old);
        continue;
      }
      if (old.begin < begin) kept.push_back({old.begin, begin, old.isid});
      if (end < old.end) kept.push_back({end, old.end, old.isid});
    }
    kept.push_back({begin, end, isid});
    intervals_ = std::move(kept);
  }
  std::sort(intervals_.begin(), intervals_.end(),
            [](const CodeInterval& a, const CodeInterval& b) { return a.begin < b.begin; });
  pt_image_free(previous_);
  previous_ = image_;
  image_ = image;
  epoch_start_ = time_ns;
  next_change_ = next_change;
  *changed = true;
  return image_;
}

bool ThreadImageCode::Locate(uint64_t ip, int* isid, uint64_t* begin, uint64_t* end) {
  const std::vector<CodeInterval>& intervals = image_.intervals();
  auto after = std::upper_bound(intervals.begin(), intervals.end(), ip,
                                [](uint64_t a, const CodeInterval& b) { return a < b.begin; });
  if (after == intervals.begin() || ip >= std::prev(after)->end) return false;
  const CodeInterval& found = *std::prev(after);
  *isid = found.isid;
  *begin = found.begin;
  *end = found.end;
  return true;
}

int ThreadImageCode::Read(uint64_t ip, uint8_t* buffer, size_t size, int* isid,
                          uint64_t* section_end) {
  uint64_t begin = 0, end = 0;
  if (Locate(ip, isid, &begin, &end)) {
    *section_end = end;
    const uint64_t n = std::min<uint64_t>(size, end - ip);
    if (const uint8_t* bytes = image_.images().SectionBytes(*isid)) {
      // [begin, end) lies inside the section (later sections only cut earlier ones).
      std::memcpy(buffer, bytes + (ip - image_.images().SectionRange(*isid).first), n);
      return static_cast<int>(n);
    }
    return pt_iscache_read(image_.iscache(), buffer, n, *isid, ip);
  }
  // As libipt's image: what no section holds comes from the read callback (JIT code).
  *isid = 0;
  *section_end = UINT64_MAX;
  const size_t read = image_.ReadJit(buffer, size, ip);
  return read == 0 ? -pte_nomap : static_cast<int>(read);
}

const uint8_t* ThreadImageCode::Bytes(uint64_t ip, int* isid, uint64_t* section_end) {
  // Read's first case, without the copy.
  uint64_t begin = 0, end = 0;
  if (!Locate(ip, isid, &begin, &end)) return nullptr;
  const uint8_t* bytes = image_.images().SectionBytes(*isid);
  if (bytes == nullptr) return nullptr;
  *section_end = end;
  return bytes + (ip - image_.images().SectionRange(*isid).first);
}

// One section cache per worker. libipt maps and unmaps a section, under that section's mutex and
// its cache's, for every instruction it decodes outside its block cache (on the way to each
// syscall and event); with one cache shared by all workers those locks and the block cache's
// lines bounced between cores, and --jobs 2 spent about 10% more CPU than with a cache per worker
// (same output). Each worker's cache still serves all the units it decodes.
std::vector<std::unique_ptr<CodeImages>> CodeImages::ForWorkers(
    unsigned workers, const SidebandTimeline& timeline, const std::vector<Stream>& streams,
    symbols::ModuleResolver& resolver, const symbols::JitCodeStore& jit) {
  std::vector<uint32_t> pids;
  for (const Stream& stream : streams) {
    if (stream.cpu < 0) pids.push_back(stream.key.pid);
  }
  for (uint32_t pid : timeline.ScheduledPids()) pids.push_back(pid);
  std::vector<std::unique_ptr<CodeImages>> images;
  for (unsigned worker = 0; worker < workers; ++worker) {
    images.push_back(std::make_unique<CodeImages>(timeline.address_space(), resolver));
    if (!jit.empty()) images.back()->SetJitCode(&jit);
    images.back()->Prepare(pids);
  }
  return images;
}

}  // namespace ptscope::decode
