// Time-versioned process address spaces (see the diagram in symbols.h).
#include "ptscope/symbols.h"

namespace ptscope::symbols {

uint32_t AddressSpace::InternModule(const std::string& path,
                                    const std::vector<uint8_t>& build_id) {
  auto key = std::make_pair(path, build_id);
  auto it = module_index_.find(key);
  if (it != module_index_.end()) return it->second;
  uint32_t index = static_cast<uint32_t>(modules_.size());
  modules_.push_back(Module{path, build_id});
  module_index_.emplace(std::move(key), index);
  return index;
}

void AddressSpace::Map(uint32_t pid, uint64_t time_ns, uint64_t start, uint64_t len,
                       uint64_t pgoff, uint32_t module) {
  if (len == 0) return;
  uint64_t end = start + len < start ? UINT64_MAX : start + len;
  std::vector<Mapping>& mappings = by_pid_[pid];
  // End every live mapping the new one overlaps; keep its uncovered parts as new mappings.
  std::vector<Mapping> remainders;
  for (Mapping& old : mappings) {
    if (old.valid_until <= time_ns || old.end <= start || old.start >= end) continue;
    if (old.valid_from >= time_ns) {
      // Replaced at the same instant it began: it never held an address.
      old.valid_until = old.valid_from;
    } else {
      old.valid_until = time_ns;
    }
    if (old.start < start) {
      remainders.push_back(Mapping{old.start, start, old.pgoff, old.module, time_ns, UINT64_MAX});
    }
    if (old.end > end) {
      remainders.push_back(
          Mapping{end, old.end, old.pgoff + (end - old.start), old.module, time_ns, UINT64_MAX});
    }
  }
  mappings.insert(mappings.end(), remainders.begin(), remainders.end());
  mappings.push_back(Mapping{start, end, pgoff, module, time_ns, UINT64_MAX});
}

void AddressSpace::Exec(uint32_t pid, uint64_t time_ns) {
  auto it = by_pid_.find(pid);
  if (it == by_pid_.end()) return;
  for (Mapping& mapping : it->second) {
    if (mapping.valid_until > time_ns) {
      mapping.valid_until = mapping.valid_from >= time_ns ? mapping.valid_from : time_ns;
    }
  }
}

void AddressSpace::Fork(uint32_t parent_pid, uint32_t child_pid, uint64_t time_ns) {
  if (parent_pid == child_pid) return;  // a new thread shares the address space
  auto it = by_pid_.find(parent_pid);
  if (it == by_pid_.end()) return;
  std::vector<Mapping> copied;
  for (const Mapping& mapping : it->second) {
    if (mapping.valid_from <= time_ns && time_ns < mapping.valid_until) {
      Mapping copy = mapping;
      copy.valid_from = time_ns;
      copy.valid_until = UINT64_MAX;
      copied.push_back(copy);
    }
  }
  std::vector<Mapping>& child = by_pid_[child_pid];
  child.insert(child.end(), copied.begin(), copied.end());
}

const Mapping* AddressSpace::Lookup(uint32_t pid, uint64_t address, uint64_t time_ns) const {
  auto it = by_pid_.find(pid);
  if (it == by_pid_.end()) return nullptr;
  // Newest first: the latest mapping valid at time_ns wins.
  const std::vector<Mapping>& mappings = it->second;
  for (auto m = mappings.rbegin(); m != mappings.rend(); ++m) {
    if (address >= m->start && address < m->end && m->valid_from <= time_ns &&
        time_ns < m->valid_until) {
      return &*m;
    }
  }
  return nullptr;
}

const std::vector<Mapping>& AddressSpace::MappingsOf(uint32_t pid) const {
  static const std::vector<Mapping> kNone;
  auto it = by_pid_.find(pid);
  return it == by_pid_.end() ? kNone : it->second;
}

}  // namespace ptscope::symbols
