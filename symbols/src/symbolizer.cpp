// Symbolizer facade: LLVMSymbolizer for names, lines and inlined frames; a sorted per-module
// function table (from the ELF symbol tables) for fast function starts.
#include <llvm/DebugInfo/DWARF/DWARFContext.h>
#include <llvm/DebugInfo/Symbolize/Symbolize.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "dwarf_answers.h"
#include "function_bounds.h"
#include "inline_spans.h"
#include "lazy_dwarf.h"
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

// A module's symbols (.symtab when present, else .dynsym), sorted by address: `functions`, the
// function symbols (their entries are where calls go: tail calls are told by them), and `named`,
// every symbol LLVM's symbolizer names code by (also assembly labels without a type, and data),
// for the named stretches.
struct SymbolTables {
  std::vector<FunctionEntry> functions;
  std::vector<FunctionEntry> named;
};

// Cached as two arrays of (start, size): counts first, then the entries.
std::string PackTables(const SymbolTables& tables) {
  static_assert(sizeof(FunctionEntry) == 16);
  std::string bytes;
  for (const std::vector<FunctionEntry>* table : {&tables.functions, &tables.named}) {
    const uint64_t count = table->size();
    bytes.append(reinterpret_cast<const char*>(&count), sizeof count);
    bytes.append(reinterpret_cast<const char*>(table->data()), count * sizeof(FunctionEntry));
  }
  return bytes;
}
std::optional<SymbolTables> UnpackTables(llvm::StringRef bytes) {
  SymbolTables tables;
  for (std::vector<FunctionEntry>* table : {&tables.functions, &tables.named}) {
    uint64_t count = 0;
    if (bytes.size() < sizeof count) return std::nullopt;
    std::memcpy(&count, bytes.data(), sizeof count);
    bytes = bytes.drop_front(sizeof count);
    if (count > bytes.size() / sizeof(FunctionEntry)) return std::nullopt;
    table->resize(count);
    // (an empty table's data() may be null, which memcpy must not get even for 0 bytes)
    if (count != 0) std::memcpy(table->data(), bytes.data(), count * sizeof(FunctionEntry));
    bytes = bytes.drop_front(count * sizeof(FunctionEntry));
  }
  if (!bytes.empty()) return std::nullopt;
  return tables;
}

SymbolTables ReadSymbolTables(const llvm::object::ELFObjectFileBase* elf) {
  SymbolTables tables;
  auto add = [&](const llvm::object::ELFSymbolRef& symbol) {
    auto type = symbol.getType();
    auto address = symbol.getAddress();
    auto section = symbol.getSection();
    if (!type || !address || !section) {
      if (!type) llvm::consumeError(type.takeError());
      if (!address) llvm::consumeError(address.takeError());
      if (!section) llvm::consumeError(section.takeError());
      return;
    }
    if (*address == 0 || *section == elf->section_end()) return;  // undefined or absolute
    FunctionEntry entry{*address, symbol.getSize()};
    if (*type == llvm::object::SymbolRef::ST_Function) tables.functions.push_back(entry);
    const uint8_t elf_type = symbol.getELFType();
    if (elf_type == llvm::ELF::STT_FUNC || elf_type == llvm::ELF::STT_GNU_IFUNC ||
        elf_type == llvm::ELF::STT_OBJECT || elf_type == llvm::ELF::STT_NOTYPE) {
      tables.named.push_back(entry);
    }
  };
  for (const llvm::object::ELFSymbolRef symbol : elf->symbols()) add(symbol);
  if (tables.functions.empty() && tables.named.empty()) {
    for (const llvm::object::ELFSymbolRef symbol : elf->getDynamicSymbolIterators()) add(symbol);
  }
  for (std::vector<FunctionEntry>* table : {&tables.functions, &tables.named}) {
    std::sort(table->begin(), table->end(), [](const FunctionEntry& a, const FunctionEntry& b) {
      return a.start != b.start ? a.start < b.start : a.size > b.size;
    });
  }
  return tables;
}

// A debug file as the cache knows it (see Symbolizer::Impl::IdentityOf).
struct FileIdentity {
  std::string build_id;         // "" when it has none or nothing is cached
  SectionCache::Source source;  // the whole file's size and hash
  bool own_answers = false;     // its DWARF answers depend on it alone (DwarfAnswers)
};

// With a `cache`, the tables of a file with a build id are kept there ("table.symbols"): walking
// a libc's symbol table through LLVM's accessors and sorting it was a tenth of a small capture's
// decode.
SymbolTables LoadSymbolTables(const std::string& path, std::string* error,
                              const SectionCache* cache, const FileIdentity& id) {
  if (!id.build_id.empty()) {
    if (auto hit = cache->Find(id.build_id, "table.symbols", id.source)) {
      if (std::optional<SymbolTables> tables = UnpackTables(hit->bytes)) return std::move(*tables);
    }
  }
  auto owning = llvm::object::ObjectFile::createObjectFile(path);
  if (!owning) {
    *error = llvm::toString(owning.takeError());
    return {};
  }
  const auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(owning->getBinary());
  if (elf == nullptr) return {};
  SymbolTables tables = ReadSymbolTables(elf);
  if (!id.build_id.empty()) cache->Store(id.build_id, "table.symbols", id.source, PackTables(tables));
  return tables;
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
  // Per debug file: its tables, each loaded on first use.
  struct ModuleTables {
    std::optional<SymbolTables> symbols;
    std::optional<std::vector<PltStub>> plt;              // from the code file
    std::optional<std::vector<CodeRange>> fdes;           // .eh_frame of the code file
    std::optional<std::vector<std::pair<uint64_t, bool>>> named;  // see NamedStretches
  };
  std::unordered_map<std::string, ModuleTables> tables;
  std::unordered_map<std::string, std::string> code_files;  // debug path -> code path
  std::map<std::pair<std::string, uint64_t>, Symbol> cache;
  std::set<std::string> failed_modules;
  std::vector<std::string> failures;
  MiniDebugInfoSymbolizer mini;  // stripped binaries with .gnu_debugdata
  RelativeDwoSymbolizer relative_dwo;  // split DWARF with a relative DW_AT_comp_dir
  InlineSpanIndex inline_spans;
  // Decompressed debug sections kept between runs; read from the environment on first use.
  std::optional<SectionCache> section_cache;
  const SectionCache* Cache() {
    if (!section_cache) section_cache = SectionCache::FromEnvironment();
    return &*section_cache;
  }
  // Per debug file, read once: its build id and whole-file hash, which key its cached tables
  // and DWARF answers (so that the file is hashed once, not per table).
  std::unordered_map<std::string, FileIdentity> identities;
  const FileIdentity& IdentityOf(const std::string& path) {
    auto [it, inserted] = identities.try_emplace(path);
    if (!inserted || !Cache()->enabled()) return it->second;
    auto owning = llvm::object::ObjectFile::createObjectFile(path);
    if (!owning) {
      llvm::consumeError(owning.takeError());  // Symbols() reports it
      return it->second;
    }
    const llvm::object::ObjectFile& object = *owning->getBinary();
    if (!llvm::isa<llvm::object::ELFObjectFileBase>(object)) return it->second;
    it->second.build_id = BuildIdHex(object);
    if (it->second.build_id.empty()) return it->second;
    it->second.source = SectionCache::SourceOf(object.getData());
    it->second.own_answers = !ReadsOtherDebugFile(object, path);
    return it->second;
  }
  // Per debug file: its DWARF answers kept between runs; nullptr when they cannot be kept.
  // (Declared after section_cache: written back when destroyed, through it.)
  std::unordered_map<std::string, std::unique_ptr<DwarfAnswers>> answers;
  DwarfAnswers* Answers(const std::string& path) {
    auto [it, inserted] = answers.try_emplace(path);
    if (inserted) {
      const FileIdentity& id = IdentityOf(path);
      if (id.own_answers) it->second = std::make_unique<DwarfAnswers>(Cache(), id.build_id, id.source);
    }
    return it->second.get();
  }

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
    // Sections are read when first asked for: most modules need only a few of them.
    std::unique_ptr<llvm::DWARFContext> context =
        MakeLazyDwarfContext(*owning->getBinary(), Cache(), quiet);
    if (relative_dwo.Offer(path, *owning, context)) return;
    inline_spans.Adopt(path, std::move(*owning), std::move(context));
  }

  // The inlined frames at `vaddr`: kept ones (DwarfAnswers), else from the DWARF (then kept
  // when they depend on the debug file alone).
  llvm::Expected<llvm::DIInliningInfo> Inlined(const std::string& path, uint64_t vaddr) {
    DwarfAnswers* kept = Answers(path);
    if (kept != nullptr) {
      if (const llvm::DIInliningInfo* frames = kept->FramesAt(vaddr)) return *frames;
    }
    EnsureDwarf(path);
    llvm::DIInliningInfo info;
    if (relative_dwo.Symbolize(path, vaddr, &info)) return info;
    if (inline_spans.Symbolize(path, vaddr, &info)) {
      if (kept != nullptr && inline_spans.AnswersFromOwnFile(path, vaddr)) kept->AddFrames(vaddr, info);
      return info;
    }
    return llvm_symbolizer.symbolizeInlinedCode(
        path, {vaddr, llvm::object::SectionedAddress::UndefSection});
  }

  const std::string& CodeFileOf(const std::string& path) const {
    auto it = code_files.find(path);
    return it == code_files.end() ? path : it->second;
  }
  const SymbolTables& Symbols(const std::string& path) {
    ModuleTables& t = tables[path];
    if (!t.symbols) {
      std::string error;
      t.symbols = LoadSymbolTables(path, &error, Cache(), IdentityOf(path));
      if (!error.empty()) Fail(path, error);
    }
    return *t.symbols;
  }
  const std::vector<FunctionEntry>& Functions(const std::string& path) {
    return Symbols(path).functions;
  }
  const std::vector<PltStub>& Plt(const std::string& path) {
    ModuleTables& t = tables[path];
    if (!t.plt) {
      // Kept under the code file's build id, checked against both files (function_bounds.h).
      const std::string& code_path = CodeFileOf(path);
      const FileIdentity& code = IdentityOf(code_path);
      const FileIdentity& debug = IdentityOf(path);  // (references stay valid on rehashing)
      t.plt = code.build_id.empty() || debug.build_id.empty()
                  ? LoadPltStubs(code_path, path)
                  : LoadPltStubs(code_path, path, Cache(), code.build_id, code.source, debug.source);
    }
    return *t.plt;
  }
  const std::vector<CodeRange>& Fdes(const std::string& path) {
    ModuleTables& t = tables[path];
    if (!t.fdes) {
      const FileIdentity& code = IdentityOf(CodeFileOf(path));  // hashed once for both tables
      t.fdes = LoadFdeRanges(CodeFileOf(path), Cache(), code.build_id.empty() ? nullptr : &code.source);
    }
    return *t.fdes;
  }
  void Fail(const std::string& path, const std::string& reason) {
    if (failed_modules.insert(path).second) failures.push_back(path + ": " + reason);
  }
  // The PLT stub holding vaddr, or nullptr.
  const PltStub* Stub(const std::string& path, uint64_t vaddr) {
    const std::vector<PltStub>& table = Plt(path);
    auto next = std::upper_bound(table.begin(), table.end(), vaddr,
                                 [](uint64_t a, const PltStub& e) { return a < e.start; });
    if (next == table.begin()) return nullptr;
    --next;
    return vaddr - next->start < next->size ? &*next : nullptr;
  }
  // Entry of the function holding vaddr by name: a PLT stub, a symbol (the symbol table, else
  // MiniDebugInfo); 0 when none covers it.
  uint64_t StartFromSymbols(const std::string& path, uint64_t vaddr) {
    if (const PltStub* stub = Stub(path, vaddr)) return stub->start;
    const std::vector<FunctionEntry>& table = Functions(path);
    auto it = std::upper_bound(table.begin(), table.end(), vaddr,
                               [](uint64_t a, const FunctionEntry& e) { return a < e.start; });
    if (it != table.begin()) {
      --it;
      if (it->size == 0 || vaddr - it->start < it->size) return it->start;
    }
    return mini.Symbolize(path, vaddr).function_start;
  }
  // StartFromSymbols' function as [start, end) (see Symbolizer::FunctionRange); {0, 0}: none.
  std::pair<uint64_t, uint64_t> RangeFromSymbols(const std::string& path, uint64_t vaddr) {
    if (const PltStub* stub = Stub(path, vaddr)) return {stub->start, stub->start + stub->size};
    const std::vector<FunctionEntry>& table = Functions(path);
    auto it = std::upper_bound(table.begin(), table.end(), vaddr,
                               [](uint64_t a, const FunctionEntry& e) { return a < e.start; });
    if (it != table.begin()) {
      auto found = std::prev(it);
      if (found->size == 0 || vaddr - found->start < found->size) {
        // The next symbol starts another function (FunctionStart finds it from there).
        uint64_t end = it == table.end() ? UINT64_MAX : it->start;
        if (found->size != 0) end = std::min(end, found->start + found->size);
        // A PLT stub further on is a function of its own, too.
        const std::vector<PltStub>& plt = Plt(path);
        auto stub = std::upper_bound(plt.begin(), plt.end(), vaddr,
                                     [](uint64_t a, const PltStub& e) { return a < e.start; });
        if (stub != plt.end()) end = std::min(end, stub->start);
        return {found->start, end};
      }
    }
    // MiniDebugInfo names a start only: {start, 0}.
    return {mini.Symbolize(path, vaddr).function_start, 0};
  }
  // Entry of the .eh_frame FDE holding vaddr (stripped code keeps them); 0 when none does.
  uint64_t StartFromFde(const std::string& path, uint64_t vaddr) {
    const std::vector<CodeRange>& fdes = Fdes(path);
    auto fde = std::upper_bound(fdes.begin(), fdes.end(), vaddr,
                                [](uint64_t a, const CodeRange& r) { return a < r.start; });
    if (fde == fdes.begin()) return 0;
    --fde;
    return vaddr - fde->start < fde->size ? fde->start : 0;
  }
  const std::vector<std::pair<uint64_t, bool>>& NamedStretches(const std::string& path);
};

// Stretches of a module's code (in vaddr order, each from its start to the next one's) that are
// all named or all unnamed: named are the symbols LLVM's symbolizer names code by (a sized one
// over its size, an unsized one until the next symbol), PLT stubs and MiniDebugInfo functions;
// unnamed the FDEs no name covers. Padding between two functions belongs to the first, so that
// a fully named module is one stretch (the decoder asks again only when code crosses a stretch).
const std::vector<std::pair<uint64_t, bool>>& Symbolizer::Impl::NamedStretches(
    const std::string& path) {
  ModuleTables& t = tables[path];
  if (t.named) return *t.named;
  struct Interval {
    uint64_t start, end;
    bool named;
  };
  std::vector<Interval> intervals;
  auto add_functions = [&](const std::vector<std::pair<uint64_t, uint64_t>>& functions) {
    for (size_t i = 0; i < functions.size(); ++i) {
      auto [start, size] = functions[i];
      uint64_t end = start + size;
      if (size == 0) end = i + 1 < functions.size() && functions[i + 1].first > start
                               ? functions[i + 1].first : start + 1;
      intervals.push_back({start, end, true});
    }
  };
  std::vector<std::pair<uint64_t, uint64_t>> functions;
  for (const FunctionEntry& f : Symbols(path).named) {
    // At one address LLVM keeps the largest size (the table is sorted so: the first).
    if (functions.empty() || functions.back().first != f.start) functions.emplace_back(f.start, f.size);
  }
  add_functions(functions);
  add_functions(mini.Functions(path));
  for (const PltStub& stub : Plt(path)) intervals.push_back({stub.start, stub.start + stub.size, true});
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  // The union of the named intervals, to leave out FDEs of named functions.
  std::vector<std::pair<uint64_t, uint64_t>> covered;
  for (const Interval& i : intervals) {
    if (!covered.empty() && i.start <= covered.back().second) {
      covered.back().second = std::max(covered.back().second, i.end);
    } else {
      covered.emplace_back(i.start, i.end);
    }
  }
  for (const CodeRange& fde : Fdes(path)) {
    auto after = std::upper_bound(covered.begin(), covered.end(), std::make_pair(fde.start, UINT64_MAX));
    bool named = after != covered.begin() && fde.start < std::prev(after)->second;
    if (!named) intervals.push_back({fde.start, fde.start + fde.size, false});
  }
  std::stable_sort(intervals.begin(), intervals.end(),
                   [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::vector<std::pair<uint64_t, bool>> stretches = {{0, false}};
  for (const Interval& i : intervals) {
    if (i.named == stretches.back().second) continue;
    if (i.start == stretches.back().first) {
      stretches.back().second = i.named;  // nothing before it at that address
      if (stretches.size() > 1 && stretches[stretches.size() - 2].second == i.named) {
        stretches.pop_back();
      }
    } else {
      stretches.emplace_back(i.start, i.named);
    }
  }
  t.named = std::move(stretches);
  return *t.named;
}

Symbolizer::Symbolizer() : impl_(std::make_unique<Impl>()) {}
Symbolizer::~Symbolizer() = default;

Symbol Symbolizer::Symbolize(const std::string& debug_path, uint64_t vaddr) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto key = std::make_pair(debug_path, vaddr);
  auto cached = impl_->cache.find(key);
  if (cached != impl_->cache.end()) return cached->second;
  Symbol symbol;
  if (const PltStub* stub = impl_->Stub(debug_path, vaddr)) {
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
  if (!symbol.found) {
    MiniSymbol mini = impl_->mini.Symbolize(debug_path, vaddr);
    if (mini.found) {
      symbol.found = true;
      symbol.function = mini.function;
    }
  }
  // The symbol table's entry over DWARF's (a function split in parts has one per part); the FDE
  // for code without either.
  if (uint64_t start = impl_->StartFromSymbols(debug_path, vaddr); start != 0) {
    symbol.function_start = start;
  } else if (symbol.function_start == 0) {
    symbol.function_start = impl_->StartFromFde(debug_path, vaddr);
  }
  impl_->cache.emplace(std::move(key), symbol);
  return symbol;
}

std::shared_ptr<const InlineDepthSpan> Symbolizer::InlineDepths(const std::string& debug_path,
                                                                uint64_t vaddr) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->failed_modules.count(debug_path) != 0) return nullptr;
  // PLT stubs have no inlined frames (Symbolize names them from the PLT table).
  if (const PltStub* stub = impl_->Stub(debug_path, vaddr)) {
    auto span = std::make_shared<InlineDepthSpan>();
    span->begin = stub->start;
    span->end = stub->start + stub->size;
    span->steps.push_back({stub->start, 0});
    return span;
  }
  DwarfAnswers* kept = impl_->Answers(debug_path);
  if (kept != nullptr) {
    if (std::shared_ptr<const InlineDepthSpan> span = kept->SpanAt(vaddr)) return span;
  }
  impl_->EnsureDwarf(debug_path);
  std::shared_ptr<const InlineDepthSpan> span = impl_->inline_spans.SpanAt(debug_path, vaddr);
  // (SpanAt answers only from the module's own DWARF, never for split units)
  if (span != nullptr && kept != nullptr) kept->AddSpan(span);
  return span;
}

uint64_t Symbolizer::FunctionStart(const std::string& debug_path, uint64_t vaddr) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  uint64_t start = impl_->StartFromSymbols(debug_path, vaddr);
  return start != 0 ? start : impl_->StartFromFde(debug_path, vaddr);
}

std::pair<uint64_t, uint64_t> Symbolizer::FunctionRange(const std::string& debug_path,
                                                        uint64_t vaddr) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::pair<uint64_t, uint64_t> range = impl_->RangeFromSymbols(debug_path, vaddr);
  if (range.first != 0) return range.second != 0 ? range : std::pair<uint64_t, uint64_t>{0, 0};
  const uint64_t start = impl_->StartFromFde(debug_path, vaddr);
  if (start == 0) return {0, 0};
  const std::vector<CodeRange>& fdes = impl_->Fdes(debug_path);
  auto fde = std::upper_bound(fdes.begin(), fdes.end(), vaddr,
                              [](uint64_t a, const CodeRange& r) { return a < r.start; });
  return {start, std::prev(fde)->start + std::prev(fde)->size};
}

void Symbolizer::SetCodeFile(const std::string& debug_path, const std::string& code_path) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto [it, inserted] = impl_->code_files.emplace(debug_path, code_path);
  if (!inserted && it->second == code_path) return;
  it->second = code_path;
  // Tables read from the code file are read again from the right one.
  Impl::ModuleTables& tables = impl_->tables[debug_path];
  tables.plt.reset();
  tables.fdes.reset();
  tables.named.reset();
  for (auto cached = impl_->cache.begin(); cached != impl_->cache.end();) {
    cached = cached->first.first == debug_path ? impl_->cache.erase(cached) : std::next(cached);
  }
}

NamedStretch Symbolizer::NamedStretchAt(const std::string& debug_path, uint64_t vaddr) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const std::vector<std::pair<uint64_t, bool>>& stretches = impl_->NamedStretches(debug_path);
  auto next = std::upper_bound(stretches.begin(), stretches.end(), std::make_pair(vaddr, true));
  NamedStretch stretch;  // stretches.front() starts at 0: `next` is past it
  stretch.begin = std::prev(next)->first;
  stretch.named = std::prev(next)->second;
  stretch.end = next == stretches.end() ? UINT64_MAX : next->first;
  return stretch;
}

std::vector<std::string> Symbolizer::failures() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->failures;
}

}  // namespace ptscope::symbols
