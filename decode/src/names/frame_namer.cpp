// Names for addresses (see frame_namer.h).
#include "names/frame_namer.h"

#include <cinttypes>
#include <cstdio>

#include "ptscope/format.h"

namespace ptscope::decode {
namespace {

std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%" PRIx64, value);
  return text;
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

const symbols::Mapping* SymbolsFrameNamer::FindMapping(uint32_t pid, uint64_t address,
                                                       uint64_t time_ns) const {
  if (const symbols::Mapping* m = address_space_.Lookup(pid, address, time_ns)) return m;
  // Sideband times can trail the code they describe by a little: fall back to the newest
  // mapping that ever held the address.
  const std::vector<symbols::Mapping>& all = address_space_.MappingsOf(pid);
  for (auto m = all.rbegin(); m != all.rend(); ++m) {
    if (address >= m->start && address < m->end && m->valid_until > m->valid_from) return &*m;
  }
  return nullptr;
}

std::optional<symbols::JitName> SymbolsFrameNamer::JitName(uint32_t pid, uint64_t address,
                                                           uint64_t time_ns) const {
  if (jit_ == nullptr) return std::nullopt;
  // A file-backed mapping holding the address wins: JIT code lives in anonymous memory.
  if (const symbols::Mapping* mapping = FindMapping(pid, address, time_ns)) {
    if (IsFileBacked(mapping)) return std::nullopt;
  }
  return jit_->Name(pid, address, time_ns);
}

const symbols::ModuleFiles& SymbolsFrameNamer::FilesOf(uint32_t module) {
  if (module >= module_files_.size()) module_files_.resize(module + 1, nullptr);
  const symbols::ModuleFiles*& files = module_files_[module];
  if (files == nullptr) {
    const symbols::Module& m = address_space_.modules()[module];
    files = &resolver_.Resolve(m.path, m.build_id);
  }
  return *files;
}

SymbolsFrameNamer::Location SymbolsFrameNamer::Locate(uint32_t pid, uint64_t address,
                                                      uint64_t time_ns) {
  Location location;
  location.mapping = FindMapping(pid, address, time_ns);
  if (location.mapping == nullptr) return location;
  const symbols::Module& module = address_space_.modules()[location.mapping->module];
  uint64_t file_offset = location.mapping->pgoff + (address - location.mapping->start);
  if (module.path == "[vdso]") {
    std::string path = resolver_.VdsoPath(pid);
    if (path.empty()) return location;
    location.code_path = location.debug_path = path;
    Result<symbols::ElfInfo> elf = symbols::ReadElfInfo(path);
    if (!elf) return location;
    auto vaddr = symbols::FileOffsetToVaddr(*elf, file_offset);
    location.has_vaddr = vaddr.has_value();
    location.vaddr = vaddr.value_or(0);
    return location;
  }
  const symbols::ModuleFiles& files = FilesOf(location.mapping->module);
  if (files.code_path.empty()) return location;
  if (files.debug_path != files.code_path && code_files_told_.insert(location.mapping->module).second) {
    symbolizer_.SetCodeFile(files.debug_path, files.code_path);
  }
  location.code_path = files.code_path;
  location.debug_path = files.debug_path;
  location.code_elf = &files.code_elf;
  auto vaddr = symbols::FileOffsetToVaddr(files.code_elf, file_offset);
  location.has_vaddr = vaddr.has_value();
  location.vaddr = vaddr.value_or(0);
  return location;
}

FrameName SymbolsFrameNamer::Name(uint32_t pid, uint64_t address, uint64_t time_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  return NameLocked(pid, address, time_ns);
}

uint32_t SymbolsFrameNamer::InlineDepth(uint32_t pid, uint64_t address, uint64_t time_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<uint32_t>(NameLocked(pid, address, time_ns).inlined.size());
}

InlineDepthStretch SymbolsFrameNamer::InlineStretch(uint32_t pid, uint64_t address,
                                                   uint64_t time_ns) {
  // Depth 0 everywhere: code whose module files or debug info were not found.
  static const auto kNoInlining = [] {
    auto span = std::make_shared<symbols::InlineDepthSpan>();
    span->end = UINT64_MAX;
    span->steps.push_back({0, 0});
    return std::shared_ptr<const symbols::InlineDepthSpan>(std::move(span));
  }();
  std::lock_guard<std::mutex> lock(mutex_);
  InlineDepthStretch stretch;
  if (JitName(pid, address, time_ns)) return stretch;  // JIT code: per address
  Location location = Locate(pid, address, time_ns);
  if (location.mapping == nullptr || location.code_elf == nullptr) return stretch;
  // The bias from ELF vaddr to runtime address holds inside one mapping and one PT_LOAD.
  uint64_t begin = location.mapping->start, end = location.mapping->end;
  std::shared_ptr<const symbols::InlineDepthSpan> span = kNoInlining;
  uint64_t bias = 0;
  if (location.has_vaddr && !location.debug_path.empty()) {
    span = symbolizer_.InlineDepths(location.debug_path, location.vaddr);
    if (span == nullptr) return stretch;
    bias = address - location.vaddr;
    const symbols::LoadSegment* segment = nullptr;
    for (const symbols::LoadSegment& s : location.code_elf->segments) {
      if (location.vaddr >= s.vaddr && location.vaddr - s.vaddr < s.filesz) segment = &s;
    }
    if (segment == nullptr) return stretch;
    // In vaddr terms: the span, the segment and the mapping; each bound moved by the bias.
    uint64_t lo = std::max(span->begin, segment->vaddr);
    uint64_t hi = std::min(span->end, segment->vaddr + segment->filesz);
    lo = std::max(lo, location.vaddr - (address - begin));
    hi = std::min(hi, location.vaddr + (end - address));
    begin = lo + bias;
    end = hi + bias;
  }  // else Symbolize is never asked (NameLocked): no inlined frames in the whole mapping
  stretch.begin = begin;
  stretch.end = end;
  stretch.bias = bias;
  stretch.uniform = span->steps.size() == 1;
  stretch.uniform_depth = span->steps.front().depth;
  stretch.span = std::move(span);
  return stretch;
}

const FrameName& SymbolsFrameNamer::NameLocked(uint32_t pid, uint64_t address, uint64_t time_ns) {
  auto [index, inserted] = name_index_.TryEmplace(PidAddress{pid, address});
  if (!inserted) return *names_[*index - 1];
  *index = static_cast<uint32_t>(names_.size() + 1);  // before anything else inserts
  names_.push_back(std::make_unique<FrameName>());
  FrameName& name = *names_.back();
  if (std::optional<symbols::JitName> jit = JitName(pid, address, time_ns)) {
    name.name = jit->name;
    name.module = jit->has_code ? "[jit]" : "[jit: perf map]";
    name.file = jit->file;
    name.line = jit->line;
    name.symbolized = true;
    return name;
  }
  Location location = Locate(pid, address, time_ns);
  if (location.mapping == nullptr) {
    name.name = Hex(address);
    return name;
  }
  const symbols::Module& module = address_space_.modules()[location.mapping->module];
  name.module = module.path;
  if (location.has_vaddr && !location.debug_path.empty()) {
    symbols::Symbol symbol = symbolizer_.Symbolize(location.debug_path, location.vaddr);
    if (symbol.found) {
      name.name = std::move(symbol.function);
      name.file = std::move(symbol.file);
      name.line = symbol.line;
      name.symbolized = true;
      for (symbols::SourceFrame& frame : symbol.inlined) {
        name.inlined.push_back(
            FrameName::Inlined{std::move(frame.function), std::move(frame.file), frame.line});
      }
    }
  }
  if (!name.symbolized) {
    uint64_t offset = location.mapping->pgoff + (address - location.mapping->start);
    name.name = Basename(module.path) + "+" + Hex(offset);
  }
  return name;
}

bool SymbolsFrameNamer::IsProgramEntry(uint32_t pid, uint64_t address, uint64_t time_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (JitName(pid, address, time_ns)) return false;
  const Location location = Locate(pid, address, time_ns);
  return location.code_elf != nullptr && location.has_vaddr && location.code_elf->entry != 0 &&
         location.vaddr == location.code_elf->entry;
}

uint64_t SymbolsFrameNamer::FunctionStart(uint32_t pid, uint64_t address, uint64_t time_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t* cached = starts_.TryEmplace(PidAddress{pid, address}).first;
  if (*cached != 0) return *cached - 1;
  uint64_t start = 0;
  if (std::optional<symbols::JitName> jit = JitName(pid, address, time_ns)) {
    start = jit->start;
  } else {
    Location location = Locate(pid, address, time_ns);
    if (location.has_vaddr && !location.debug_path.empty()) {
      uint64_t vaddr_start = symbolizer_.FunctionStart(location.debug_path, location.vaddr);
      if (vaddr_start != 0 && vaddr_start <= location.vaddr) {
        start = address - (location.vaddr - vaddr_start);
      }
    }
  }
  // Locate and the symbolizer do not touch starts_: `cached` is still valid.
  *cached = start + 1;
  return start;
}

std::pair<uint64_t, uint64_t> SymbolsFrameNamer::FunctionRange(uint32_t pid, uint64_t address,
                                                               uint64_t time_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  // JIT code's end is not kept (names are per address): not known.
  if (JitName(pid, address, time_ns)) return {0, 0};
  Location location = Locate(pid, address, time_ns);
  if (!location.has_vaddr || location.debug_path.empty()) return {0, 0};
  auto [begin, end] = symbolizer_.FunctionRange(location.debug_path, location.vaddr);
  if (begin == 0 || begin > location.vaddr || end <= location.vaddr) return {0, 0};
  // In runtime addresses, within the mapping (the bias from vaddr to address holds only there).
  const uint64_t above = std::min(end - location.vaddr, location.mapping->end - address);
  return {address - (location.vaddr - begin), address + above};
}

bool SymbolsFrameNamer::InNamedCode(uint32_t pid, uint64_t address, uint64_t time_ns,
                                    uint64_t* start, uint64_t* end) {
  std::lock_guard<std::mutex> lock(mutex_);
  *start = address;
  *end = address + 1;
  if (JitName(pid, address, time_ns)) return true;
  const symbols::Mapping* mapping = FindMapping(pid, address, time_ns);
  if (mapping == nullptr) return false;
  // With JIT code, anonymous mappings hold named and unnamed code: ask per address there.
  const bool per_address = jit_ != nullptr && !IsFileBacked(mapping);
  if (!per_address) {
    *start = mapping->start;
    *end = mapping->end;
  }
  Location location = Locate(pid, address, time_ns);
  if (location.debug_path.empty() || !location.has_vaddr) return false;
  symbols::NamedStretch stretch = symbolizer_.NamedStretchAt(location.debug_path, location.vaddr);
  if (!stretch.named) NoteUnnamedCode(mapping->module, location.debug_path);
  if (per_address) return stretch.named;
  // In runtime addresses: the stretch within the mapping and within the PT_LOAD holding it (the
  // bias from vaddr to address holds only there).
  uint64_t below = location.vaddr - stretch.begin, above = stretch.end - location.vaddr;
  if (location.code_elf != nullptr) {
    for (const symbols::LoadSegment& s : location.code_elf->segments) {
      if (location.vaddr >= s.vaddr && location.vaddr - s.vaddr < s.memsz) {
        below = std::min(below, location.vaddr - s.vaddr);
        above = std::min(above, s.vaddr + s.memsz - location.vaddr);
      }
    }
  }
  *start = address - std::min(below, address - mapping->start);
  *end = address + std::min(above, mapping->end - address);
  return stretch.named;
}

bool SymbolsFrameNamer::IsFileBacked(const symbols::Mapping* mapping) const {
  const std::string& path = address_space_.modules()[mapping->module].path;
  return !path.empty() && path[0] == '/' && path.rfind("//anon", 0) != 0 &&
         path.rfind("/memfd:", 0) != 0;
}

void SymbolsFrameNamer::NoteUnnamedCode(uint32_t module, const std::string& debug_path) {
  auto [it, inserted] = module_has_symbols_.emplace(module, false);
  if (!inserted) return;
  Result<symbols::ElfInfo> elf = symbols::ReadElfInfo(debug_path);
  it->second = elf && (elf->has_symtab || elf->has_debug_info);
  if (!it->second) found_without_symbols_.insert(module);
}

std::vector<std::string> SymbolsFrameNamer::UnsymbolizedNotes() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> notes;
  for (uint32_t index : found_without_symbols_) {
    const symbols::Module& module = address_space_.modules()[index];
    std::string hex = format::ToHex(module.build_id);
    std::string note = "no symbols for " + module.path + " (build id " +
                       (hex.empty() ? "unknown" : hex) + "): its functions are named " +
                       Basename(module.path) + "+0x...; pass --symbols DIR with its debug file";
    if (hex.size() > 2) note += " as DIR/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug";
    notes.push_back(std::move(note));
  }
  return notes;
}

}  // namespace ptscope::decode
