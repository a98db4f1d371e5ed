// Function bounds from .eh_frame and PLT stub names (see function_bounds.h).
#include "function_bounds.h"

#include <llvm/BinaryFormat/ELF.h>
#include <llvm/DebugInfo/DWARF/DWARFDataExtractor.h>
#include <llvm/DebugInfo/DWARF/DWARFDebugFrame.h>
#include <llvm/MC/MCInstrAnalysis.h>
#include <llvm/MC/MCInstrInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/TargetSelect.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "section_cache.h"

namespace ptscope::symbols {
namespace {

using llvm::object::ELFObjectFileBase;

const ELFObjectFileBase* AsElf(const llvm::object::OwningBinary<llvm::object::ObjectFile>& owning) {
  return llvm::dyn_cast<ELFObjectFileBase>(owning.getBinary());
}

std::optional<llvm::object::OwningBinary<llvm::object::ObjectFile>> Open(const std::string& path) {
  auto owning = llvm::object::ObjectFile::createObjectFile(path);
  if (!owning) {
    llvm::consumeError(owning.takeError());  // the symbolizer reports unreadable modules
    return std::nullopt;
  }
  return std::move(*owning);
}

std::string NameOf(const llvm::object::SymbolRef& symbol) {
  auto name = symbol.getName();
  if (!name) {
    llvm::consumeError(name.takeError());
    return {};
  }
  return name->str();
}

size_t LeadingUnderscores(const std::string& name) { return name.find_first_not_of('_'); }

// The name of the IFUNC symbol at an address (global before local), else of any function there;
// among several, the public-looking one (`strnlen` over `__strnlen`), then the first in order.
// The symbol tables are read once, on the first question: libc has hundreds of IRELATIVE stubs,
// and a pass over its symbols per stub was half of a small capture's start-up.
class IfuncNames {
 public:
  explicit IfuncNames(const std::vector<const ELFObjectFileBase*>& files) : files_(files) {}
  std::string At(uint64_t address) {
    if (!indexed_) Index();
    auto it = best_.find(address);
    return it != best_.end() ? it->second.name : std::string();
  }

 private:
  struct Best {
    int rank = 0;  // 3 global IFUNC, 2 local IFUNC, 1 other function
    std::string name;
  };
  void Index() {
    indexed_ = true;
    for (const ELFObjectFileBase* elf : files_) {
      for (const llvm::object::ELFSymbolRef symbol : elf->getDynamicSymbolIterators()) Consider(symbol);
      for (const llvm::object::ELFSymbolRef symbol : elf->symbols()) Consider(symbol);
    }
  }
  void Consider(const llvm::object::ELFSymbolRef& symbol) {
    int rank = 0;
    if (symbol.getELFType() == llvm::ELF::STT_GNU_IFUNC) {
      rank = symbol.getBinding() == llvm::ELF::STB_LOCAL ? 2 : 3;
    } else if (symbol.getELFType() == llvm::ELF::STT_FUNC) {
      rank = 1;
    }
    if (rank == 0) return;
    auto at = symbol.getAddress();
    if (!at) {
      llvm::consumeError(at.takeError());
      return;
    }
    Best& best = best_[*at];
    if (rank < best.rank) return;
    std::string name = NameOf(symbol);
    if (name.empty()) return;
    if (rank == best.rank && std::make_pair(LeadingUnderscores(name), name) >=
                                 std::make_pair(LeadingUnderscores(best.name), best.name)) {
      return;
    }
    best = Best{rank, std::move(name)};
  }

  const std::vector<const ELFObjectFileBase*>& files_;
  bool indexed_ = false;
  std::unordered_map<uint64_t, Best> best_;
};

}  // namespace

namespace {

std::vector<CodeRange> ParseFdeRanges(const llvm::object::ObjectFile& object) {
  std::vector<CodeRange> ranges;
  for (const llvm::object::SectionRef& section : object.sections()) {
    std::string name = [&] {
      auto n = section.getName();
      if (!n) {
        llvm::consumeError(n.takeError());
        return std::string();
      }
      return n->str();
    }();
    if (name != ".eh_frame" || llvm::object::ELFSectionRef(section).getType() == llvm::ELF::SHT_NOBITS) {
      continue;
    }
    auto contents = section.getContents();
    if (!contents) {
      llvm::consumeError(contents.takeError());
      return ranges;
    }
    // The section's address resolves the FDEs' pc-relative initial locations.
    llvm::DWARFDebugFrame frame(llvm::Triple::x86_64, /*IsEH=*/true, section.getAddress());
    llvm::Error parsed = frame.parse(llvm::DWARFDataExtractor(*contents, true, 8));
    llvm::consumeError(std::move(parsed));  // keep what was parsed before the damage
    for (const llvm::dwarf::FrameEntry& entry : frame.entries()) {
      if (const auto* fde = llvm::dyn_cast<llvm::dwarf::FDE>(&entry)) {
        if (fde->getAddressRange() != 0) {
          ranges.push_back(CodeRange{fde->getInitialLocation(), fde->getAddressRange()});
        }
      }
    }
  }
  std::sort(ranges.begin(), ranges.end(), [](const CodeRange& a, const CodeRange& b) {
    return a.start != b.start ? a.start < b.start : a.size > b.size;
  });
  return ranges;
}

}  // namespace

std::vector<CodeRange> LoadFdeRanges(const std::string& path, const SectionCache* cache,
                                     const SectionCache::Source* source) {
  auto owning = Open(path);
  if (!owning || AsElf(*owning) == nullptr) return {};
  const llvm::object::ObjectFile& object = *owning->getBinary();
  // (BuildIdHex reads the note pages: not worth it when nothing is cached)
  const std::string build_id =
      cache != nullptr && cache->enabled() ? BuildIdHex(object) : std::string();
  static_assert(sizeof(CodeRange) == 16);
  if (!build_id.empty()) {
    if (auto hit = source != nullptr ? cache->Find(build_id, "table.fde_ranges", *source)
                                     : cache->Find(build_id, "table.fde_ranges", object.getData());
        hit && hit->bytes.size() % sizeof(CodeRange) == 0) {
      std::vector<CodeRange> ranges(hit->bytes.size() / sizeof(CodeRange));
      if (!ranges.empty()) std::memcpy(ranges.data(), hit->bytes.data(), hit->bytes.size());
      return ranges;
    }
  }
  std::vector<CodeRange> ranges = ParseFdeRanges(object);
  if (!build_id.empty()) {
    const llvm::StringRef bytes(reinterpret_cast<const char*>(ranges.data()),
                                ranges.size() * sizeof(CodeRange));
    if (source != nullptr) {
      cache->Store(build_id, "table.fde_ranges", *source, bytes);
    } else {
      cache->Store(build_id, "table.fde_ranges", object.getData(), bytes);
    }
  }
  return ranges;
}

std::vector<PltStub> LoadPltStubs(const std::string& path, const std::string& debug_path) {
  static const bool targets_ready = [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86TargetMC();
    return true;
  }();
  (void)targets_ready;
  std::vector<PltStub> stubs;
  auto owning = Open(path);
  if (!owning || AsElf(*owning) == nullptr) return stubs;
  const ELFObjectFileBase* elf = AsElf(*owning);
  llvm::Triple triple = elf->makeTriple();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple.str(), error);
  if (target == nullptr) return stubs;
  std::unique_ptr<const llvm::MCInstrInfo> info(target->createMCInstrInfo());
  std::unique_ptr<const llvm::MCInstrAnalysis> analysis(target->createMCInstrAnalysis(info.get()));
  if (analysis == nullptr) return stubs;

  // Every stub's GOT slot, from the jumps LLVM recognises in the PLT sections. A stub begins at
  // its entry's start (entries are sh_entsize apart): with IBT the jump follows an endbr64.
  struct Stub {
    uint64_t start = 0, size = 16;
  };
  std::map<uint64_t, Stub> by_got;
  std::vector<llvm::object::SectionRef> relocation_sections;
  std::optional<uint64_t> plt0;  // the lazy-binding header: the first entry of .plt
  const auto* elf64 = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(elf);
  if (elf64 == nullptr) return stubs;
  for (const llvm::object::SectionRef& section : elf->sections()) {
    auto name = section.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name == ".rela.plt" || *name == ".rela.dyn") relocation_sections.push_back(section);
    if (*name != ".plt" && *name != ".plt.sec" && *name != ".plt.got") continue;
    auto contents = section.getContents();
    if (!contents) {
      llvm::consumeError(contents.takeError());
      continue;
    }
    const uint64_t base = section.getAddress(), size = section.getSize();
    uint64_t entry_size = elf64->getSection(section.getRawDataRefImpl())->sh_entsize;
    if (entry_size == 0 || entry_size > 16) entry_size = 16;
    if (*name == ".plt" && size >= 2 * entry_size) plt0 = base;
    for (const auto& [jump, got] :
         analysis->findPltEntries(base, llvm::arrayRefFromStringRef(*contents), triple)) {
      uint64_t start = base + (jump - base) / entry_size * entry_size;
      by_got[got] = Stub{start, std::min(entry_size, base + size - start)};
    }
  }
  std::unique_ptr<llvm::object::OwningBinary<llvm::object::ObjectFile>> debug_owning;
  std::vector<const ELFObjectFileBase*> symbol_files = {elf};
  bool debug_opened = false;
  IfuncNames ifunc_names(symbol_files);  // reads symbol_files when first asked
  for (const llvm::object::SectionRef& section : relocation_sections) {
    for (const llvm::object::RelocationRef& relocation : section.relocations()) {
      auto stub = by_got.find(relocation.getOffset());
      if (stub == by_got.end()) continue;
      std::string name;
      const uint64_t type = relocation.getType();
      if (type == llvm::ELF::R_X86_64_JUMP_SLOT || type == llvm::ELF::R_X86_64_GLOB_DAT) {
        llvm::object::symbol_iterator symbol = relocation.getSymbol();
        if (symbol != elf->symbol_end()) name = NameOf(*symbol);
      } else if (type == llvm::ELF::R_X86_64_IRELATIVE) {
        auto addend = llvm::object::ELFRelocationRef(relocation).getAddend();
        if (!addend) {
          llvm::consumeError(addend.takeError());
          continue;
        }
        if (!debug_opened && debug_path != path) {
          debug_opened = true;
          if (auto debug = Open(debug_path); debug && AsElf(*debug) != nullptr) {
            debug_owning = std::make_unique<llvm::object::OwningBinary<llvm::object::ObjectFile>>(
                std::move(*debug));
            symbol_files.push_back(AsElf(*debug_owning));
          }
        }
        name = ifunc_names.At(static_cast<uint64_t>(*addend));
        if (name.empty()) {
          char text[48];
          std::snprintf(text, sizeof text, "*ABS*+0x%" PRIx64, static_cast<uint64_t>(*addend));
          name = text;
        }
      } else {
        continue;
      }
      if (name.empty()) continue;
      stubs.push_back(PltStub{stub->second.start, stub->second.size, name + "@plt"});
    }
  }
  // PLT0 pushes the link map and jumps to ld.so's resolver: every first call of a lazily bound
  // function passes through it. Named like objdump's <.plt>.
  if (plt0 && !stubs.empty()) stubs.push_back(PltStub{*plt0, 16, ".plt"});
  std::sort(stubs.begin(), stubs.end(),
            [](const PltStub& a, const PltStub& b) { return a.start < b.start; });
  stubs.erase(std::unique(stubs.begin(), stubs.end(),
                          [](const PltStub& a, const PltStub& b) { return a.start == b.start; }),
              stubs.end());
  return stubs;
}

namespace {

constexpr uint64_t kPltVersion = 1;

void Put(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}
bool Get(llvm::StringRef& in, uint64_t* value) {
  if (in.size() < 8) return false;
  *value = 0;
  for (int i = 0; i < 8; ++i) *value |= uint64_t(static_cast<unsigned char>(in[i])) << (8 * i);
  in = in.drop_front(8);
  return true;
}

}  // namespace

std::string PackPltStubs(const std::vector<PltStub>& stubs, SectionCache::Source debug) {
  std::string out;
  for (uint64_t value : {kPltVersion, debug.size, debug.hash, uint64_t(stubs.size())}) Put(out, value);
  for (const PltStub& stub : stubs) {
    Put(out, stub.start);
    Put(out, stub.size);
    Put(out, stub.name.size());
    out += stub.name;
  }
  return out;
}

std::optional<std::vector<PltStub>> UnpackPltStubs(llvm::StringRef in, SectionCache::Source debug) {
  uint64_t version = 0, size = 0, hash = 0, count = 0;
  if (!Get(in, &version) || version != kPltVersion || !Get(in, &size) || !Get(in, &hash) ||
      size != debug.size || hash != debug.hash || !Get(in, &count) || count > in.size() / 24) {
    return std::nullopt;
  }
  std::vector<PltStub> stubs(count);
  for (PltStub& stub : stubs) {
    uint64_t length = 0;
    if (!Get(in, &stub.start) || !Get(in, &stub.size) || !Get(in, &length) || length > in.size()) {
      return std::nullopt;
    }
    stub.name = in.take_front(length).str();
    in = in.drop_front(length);
  }
  if (!in.empty()) return std::nullopt;
  return stubs;
}

std::vector<PltStub> LoadPltStubs(const std::string& path, const std::string& debug_path,
                                  const SectionCache* cache, const std::string& build_id,
                                  SectionCache::Source code, SectionCache::Source debug) {
  if (cache == nullptr || !cache->enabled() || build_id.empty()) return LoadPltStubs(path, debug_path);
  if (auto hit = cache->Find(build_id, "table.plt_stubs", code)) {
    if (auto stubs = UnpackPltStubs(hit->bytes, debug)) return std::move(*stubs);
  }
  std::vector<PltStub> stubs = LoadPltStubs(path, debug_path);
  cache->Store(build_id, "table.plt_stubs", code, PackPltStubs(stubs, debug));
  return stubs;
}

}  // namespace ptscope::symbols
