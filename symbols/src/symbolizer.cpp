// Symbolizer facade: LLVMSymbolizer for names, lines and inlined frames; a sorted per-module
// function table (from the ELF symbol tables) for fast function starts.
#include <llvm/DebugInfo/DWARF/DWARFContext.h>
#include <llvm/DebugInfo/Symbolize/Symbolize.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/TargetSelect.h>

#include <algorithm>
#include <set>

#include "inline_spans.h"
#include "minidebuginfo.h"
#include "ptscope/symbols.h"
#include "split_dwarf.h"

namespace ptscope::symbols {
namespace {

struct FunctionEntry {
  uint64_t start = 0;
  uint64_t size = 0;
};

bool IsBad(const std::string& text) { return text.empty() || text == llvm::DILineInfo::BadString; }

// Function symbols sorted by address; .symtab when present, else .dynsym.
std::vector<FunctionEntry> LoadFunctionTable(const std::string& path, std::string* error) {
  std::vector<FunctionEntry> table;
  auto owning = llvm::object::ObjectFile::createObjectFile(path);
  if (!owning) {
    *error = llvm::toString(owning.takeError());
    return table;
  }
  const auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(owning->getBinary());
  if (elf == nullptr) return table;
  auto add = [&](const llvm::object::ELFSymbolRef& symbol) {
    auto type = symbol.getType();
    auto address = symbol.getAddress();
    if (!type || !address) {
      if (!type) llvm::consumeError(type.takeError());
      if (!address) llvm::consumeError(address.takeError());
      return;
    }
    if (*type == llvm::object::SymbolRef::ST_Function && *address != 0) {
      table.push_back(FunctionEntry{*address, symbol.getSize()});
    }
  };
  for (const llvm::object::ELFSymbolRef symbol : elf->symbols()) add(symbol);
  if (table.empty()) {
    for (const llvm::object::ELFSymbolRef symbol : elf->getDynamicSymbolIterators()) add(symbol);
  }
  std::sort(table.begin(), table.end(), [](const FunctionEntry& a, const FunctionEntry& b) {
    return a.start != b.start ? a.start < b.start : a.size > b.size;
  });
  return table;
}

// PLT stubs have no symbols of their own: without this table their code is named after the
// nearest preceding symbol (`_init`, which ends where .plt starts). LLVM pairs each stub with
// its GOT slot's relocation, the way objdump names `printf@plt`.
struct PltEntry {
  uint64_t start = 0;
  uint64_t size = 16;  // x86-64 .plt/.plt.sec stubs; .plt.got stubs are 8 bytes
  std::string name;    // "printf@plt"
};

std::vector<PltEntry> LoadPltTable(const std::string& path) {
  static const bool targets_ready = [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86TargetMC();
    return true;
  }();
  (void)targets_ready;
  std::vector<PltEntry> table;
  auto owning = llvm::object::ObjectFile::createObjectFile(path);
  if (!owning) {
    llvm::consumeError(owning.takeError());  // LoadFunctionTable reports the same failure
    return table;
  }
  const auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(owning->getBinary());
  if (elf == nullptr) return table;
  uint64_t first_lazy_stub = UINT64_MAX;
  for (const llvm::object::ELFPltEntry& entry : elf->getPltEntries()) {
    if (entry.Section == ".plt") first_lazy_stub = std::min(first_lazy_stub, entry.Address);
    if (!entry.Symbol) continue;
    auto name = llvm::object::ELFSymbolRef(llvm::object::SymbolRef(*entry.Symbol, elf)).getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    uint64_t size = entry.Section == ".plt.got" ? 8 : 16;
    if (!name->empty()) table.push_back(PltEntry{entry.Address, size, name->str() + "@plt"});
  }
  // The 16-byte header before the first lazy stub (PLT0) pushes the link map and jumps to
  // ld.so's resolver: every first call of a lazily bound function passes through it. Named
  // like objdump's <.plt>.
  if (first_lazy_stub != UINT64_MAX && first_lazy_stub >= 16) {
    table.push_back(PltEntry{first_lazy_stub - 16, 16, ".plt"});
  }
  std::sort(table.begin(), table.end(),
            [](const PltEntry& a, const PltEntry& b) { return a.start < b.start; });
  return table;
}

}  // namespace

struct Symbolizer::Impl {
  Impl() : llvm_symbolizer(MakeOptions()) {}
  static llvm::symbolize::LLVMSymbolizer::Options MakeOptions() {
    llvm::symbolize::LLVMSymbolizer::Options options;
    options.Demangle = true;
    options.UseSymbolTable = true;
    options.RelativeAddresses = false;
    return options;
  }
  std::mutex mutex;
  llvm::symbolize::LLVMSymbolizer llvm_symbolizer;
  std::unordered_map<std::string, std::vector<FunctionEntry>> function_tables;
  std::unordered_map<std::string, std::vector<PltEntry>> plt_tables;
  std::map<std::pair<std::string, uint64_t>, Symbol> cache;
  std::set<std::string> failed_modules;
  std::vector<std::string> failures;
  MiniDebugInfoSymbolizer mini;  // stripped binaries with .gnu_debugdata
  RelativeDwoSymbolizer relative_dwo;  // split DWARF with a relative DW_AT_comp_dir
  InlineSpanIndex inline_spans;

  // Builds the module's DWARF context once and hands it to the reader that keeps it: the
  // relative-DWO symbolizer when the module needs it, else the inline span index.
  std::set<std::string> dwarf_built;
  void EnsureDwarf(const std::string& path) {
    if (!dwarf_built.insert(path).second) return;
    auto owning = llvm::object::ObjectFile::createObjectFile(path);
    if (!owning) {
      llvm::consumeError(owning.takeError());  // the LLVMSymbolizer path reports it
      return;
    }
    auto quiet = [](llvm::Error error) { llvm::consumeError(std::move(error)); };
    std::unique_ptr<llvm::DWARFContext> context = llvm::DWARFContext::create(
        *owning->getBinary(), llvm::DWARFContext::ProcessDebugRelocations::Process, nullptr, "",
        quiet, quiet);
    if (relative_dwo.Offer(path, *owning, context)) return;
    inline_spans.Adopt(path, std::move(*owning), std::move(context));
  }

  llvm::Expected<llvm::DIInliningInfo> Inlined(const std::string& path, uint64_t vaddr) {
    EnsureDwarf(path);
    llvm::DIInliningInfo info;
    if (relative_dwo.Symbolize(path, vaddr, &info)) return info;
    if (inline_spans.Symbolize(path, vaddr, &info)) return info;
    return llvm_symbolizer.symbolizeInlinedCode(
        path, {vaddr, llvm::object::SectionedAddress::UndefSection});
  }

  const std::vector<FunctionEntry>& Table(const std::string& path) {
    auto it = function_tables.find(path);
    if (it != function_tables.end()) return it->second;
    std::string error;
    std::vector<FunctionEntry> table = LoadFunctionTable(path, &error);
    if (!error.empty()) Fail(path, error);
    return function_tables.emplace(path, std::move(table)).first->second;
  }
  void Fail(const std::string& path, const std::string& reason) {
    if (failed_modules.insert(path).second) failures.push_back(path + ": " + reason);
  }
  // The PLT stub holding vaddr, or nullptr.
  const PltEntry* PltStub(const std::string& path, uint64_t vaddr) {
    auto it = plt_tables.find(path);
    if (it == plt_tables.end()) it = plt_tables.emplace(path, LoadPltTable(path)).first;
    const std::vector<PltEntry>& table = it->second;
    auto next = std::upper_bound(table.begin(), table.end(), vaddr,
                                 [](uint64_t a, const PltEntry& e) { return a < e.start; });
    if (next == table.begin()) return nullptr;
    --next;
    return vaddr - next->start < next->size ? &*next : nullptr;
  }
  uint64_t StartFromTable(const std::string& path, uint64_t vaddr) {
    if (const PltEntry* stub = PltStub(path, vaddr)) return stub->start;
    const std::vector<FunctionEntry>& table = Table(path);
    auto it = std::upper_bound(table.begin(), table.end(), vaddr,
                               [](uint64_t a, const FunctionEntry& e) { return a < e.start; });
    if (it == table.begin()) return 0;
    --it;
    if (it->size == 0 || vaddr - it->start < it->size) return it->start;
    return 0;
  }
};

Symbolizer::Symbolizer() : impl_(std::make_unique<Impl>()) {}
Symbolizer::~Symbolizer() = default;

Symbol Symbolizer::Symbolize(const std::string& debug_path, uint64_t vaddr) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto key = std::make_pair(debug_path, vaddr);
  auto cached = impl_->cache.find(key);
  if (cached != impl_->cache.end()) return cached->second;
  Symbol symbol;
  if (const PltEntry* stub = impl_->PltStub(debug_path, vaddr)) {
    symbol.found = true;
    symbol.function = stub->name;
    symbol.function_start = stub->start;
    impl_->cache.emplace(std::move(key), symbol);
    return symbol;
  }
  if (impl_->failed_modules.count(debug_path) == 0) {
    auto info = impl_->Inlined(debug_path, vaddr);
    if (!info) {
      impl_->Fail(debug_path, llvm::toString(info.takeError()));
    } else if (info->getNumberOfFrames() > 0) {
      // Frame 0 is the innermost inlined frame; the last one is the real function.
      uint32_t frames = info->getNumberOfFrames();
      const llvm::DILineInfo& outer = info->getFrame(frames - 1);
      if (!IsBad(outer.FunctionName)) {
        symbol.found = true;
        symbol.function = outer.FunctionName;
        if (!IsBad(outer.FileName)) symbol.file = outer.FileName;
        symbol.line = outer.Line;
        if (outer.StartAddress) symbol.function_start = *outer.StartAddress;
        for (uint32_t i = frames - 1; i-- > 0;) {
          const llvm::DILineInfo& frame = info->getFrame(i);
          symbol.inlined.push_back(SourceFrame{IsBad(frame.FunctionName) ? "" : frame.FunctionName,
                                               IsBad(frame.FileName) ? "" : frame.FileName,
                                               frame.Line});
        }
      }
    }
  }
  uint64_t table_start = impl_->StartFromTable(debug_path, vaddr);
  if (!symbol.found) {
    MiniSymbol mini = impl_->mini.Symbolize(debug_path, vaddr);
    if (mini.found) {
      symbol.found = true;
      symbol.function = mini.function;
      table_start = mini.function_start;
    }
  }
  if (table_start != 0) symbol.function_start = table_start;
  impl_->cache.emplace(std::move(key), symbol);
  return symbol;
}

std::shared_ptr<const InlineDepthSpan> Symbolizer::InlineDepths(const std::string& debug_path,
                                                                uint64_t vaddr) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->failed_modules.count(debug_path) != 0) return nullptr;
  // PLT stubs have no inlined frames (Symbolize names them from the PLT table).
  if (const PltEntry* stub = impl_->PltStub(debug_path, vaddr)) {
    auto span = std::make_shared<InlineDepthSpan>();
    span->begin = stub->start;
    span->end = stub->start + stub->size;
    span->steps.push_back({stub->start, 0});
    return span;
  }
  impl_->EnsureDwarf(debug_path);
  return impl_->inline_spans.SpanAt(debug_path, vaddr);
}

uint64_t Symbolizer::FunctionStart(const std::string& debug_path, uint64_t vaddr) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  uint64_t start = impl_->StartFromTable(debug_path, vaddr);
  if (start == 0) start = impl_->mini.Symbolize(debug_path, vaddr).function_start;
  return start;
}

std::vector<std::string> Symbolizer::failures() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->failures;
}

}  // namespace ptscope::symbols
