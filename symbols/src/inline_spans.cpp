// InlineSpanIndex (see inline_spans.h).
//
// LLVM answers "which inlined frames hold this address" (DWARFUnit::getInlinedChainForAddress)
// from a per-unit map in which every subroutine DIE's ranges are painted over its parent's, in
// tree order. A function's depth profile is the same painting restricted to that function: its
// own ranges at depth 0, each DW_TAG_inlined_subroutine one deeper than the nearest enclosing
// one. Addresses no unit covers have no inlined frames.
#include "inline_spans.h"

#include "llvm_frames.h"

#include <llvm/BinaryFormat/Dwarf.h>
#include <llvm/DebugInfo/DWARF/DWARFCompileUnit.h>
#include <llvm/DebugInfo/DWARF/DWARFDataExtractor.h>
#include <llvm/DebugInfo/DWARF/DWARFDebugArangeSet.h>
#include <llvm/DebugInfo/DWARF/DWARFDie.h>
#include <llvm/DebugInfo/Symbolize/SymbolizableObjectFile.h>
#include <llvm/Object/BuildID.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Support/FileSystem.h>

#include <algorithm>
#include <cstdio>
#include <unordered_set>

namespace ptscope::symbols {
namespace {

constexpr uint32_t kUnpainted = UINT32_MAX;

// Paints [lo, hi) with `depth` over what is there, keeping what follows hi.
void Paint(std::map<uint64_t, uint32_t>& painting, uint64_t lo, uint64_t hi, uint32_t depth) {
  if (lo >= hi) return;
  auto at_hi = painting.upper_bound(hi);
  const uint32_t after = at_hi == painting.begin() ? kUnpainted : std::prev(at_hi)->second;
  painting.erase(painting.lower_bound(lo), painting.upper_bound(hi));
  painting[lo] = depth;
  painting[hi] = after;
}

// Every subroutine DIE below `die`, in tree order, painted at its inlined depth. LLVM's chain
// stops at the innermost DW_TAG_subprogram, so a function nested in this one (a local class's
// method, code GCC keeps inside its parent's tree) starts again at depth 0.
void PaintChildren(const llvm::DWARFDie& die, uint32_t depth, uint64_t lo, uint64_t hi,
                   std::map<uint64_t, uint32_t>& painting) {
  for (llvm::DWARFDie child = die.getFirstChild(); child; child = child.getSibling()) {
    uint32_t child_depth = depth;
    if (child.getTag() == llvm::dwarf::DW_TAG_inlined_subroutine) child_depth = depth + 1;
    if (child.isSubprogramDIE()) child_depth = 0;
    if (child.isSubroutineDIE()) {
      auto ranges = child.getAddressRanges();
      if (!ranges) {
        llvm::consumeError(ranges.takeError());
      } else {
        for (const llvm::DWARFAddressRange& range : *ranges) {
          Paint(painting, std::max(range.LowPC, lo), std::min(range.HighPC, hi), child_depth);
        }
      }
    }
    PaintChildren(child, child_depth, lo, hi, painting);
  }
}

// The debug file LLVMSymbolizer would look up by build ID instead of `path`, if one exists.
bool HasOtherBuildIdDebugFile(const llvm::object::ObjectFile& object, const std::string& path) {
  const auto* elf = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(&object);
  if (elf == nullptr) return false;
  llvm::object::BuildIDRef id = llvm::object::getBuildID(elf);
  if (id.size() < 2) return false;
  std::string hex;
  for (uint8_t byte : id) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", byte);
    hex += two;
  }
  std::string candidate = "/usr/lib/debug/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug";
  if (!llvm::sys::fs::exists(candidate)) return false;
  return !llvm::sys::fs::equivalent(candidate, path);
}

bool HasDebuglink(const llvm::object::ObjectFile& object) {
  for (const llvm::object::SectionRef& section : object.sections()) {
    auto name = section.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name == ".gnu_debuglink") return true;
  }
  return false;
}

// Where no unit covers an address there are no inlined frames: the [lo, hi) of every unit,
// sorted, from the same facts LLVM's getCompileUnitForCodeAddress decides by (its
// DWARFDebugAranges): the .debug_aranges sets, and the DIE ranges of the units no set names.
// Read the first time an address falls outside every unit; reading every unit's DIE instead
// parsed each unit's abbreviations, most of a small capture's start-up for a libc.
const RangeList& UnitRanges(llvm::DWARFContext& context, std::optional<RangeList>& cached) {
  if (cached) return *cached;
  cached.emplace();
  std::unordered_set<uint64_t> described;  // units that have an aranges set
  llvm::DWARFDataExtractor aranges(context.getDWARFObj().getArangesSection(),
                                   context.isLittleEndian(), 0);
  uint64_t offset = 0;
  llvm::DWARFDebugArangeSet set;
  while (aranges.isValidOffset(offset)) {
    if (llvm::Error error = set.extract(aranges, &offset, llvm::consumeError)) {
      llvm::consumeError(std::move(error));  // LLVM stops at the same place
      break;
    }
    for (const llvm::DWARFDebugArangeSet::Descriptor& range : set.descriptors()) {
      if (range.Address < range.getEndAddress()) {
        cached->emplace_back(range.Address, range.getEndAddress());
      }
    }
    described.insert(set.getCompileUnitDIEOffset());
  }
  for (const auto& unit : context.compile_units()) {
    if (described.count(unit->getOffset()) != 0) continue;
    auto ranges = unit->collectAddressRanges();
    if (!ranges) {
      llvm::consumeError(ranges.takeError());
      continue;
    }
    for (const llvm::DWARFAddressRange& range : *ranges) {
      if (range.LowPC < range.HighPC) cached->emplace_back(range.LowPC, range.HighPC);
    }
  }
  std::sort(cached->begin(), cached->end());
  return *cached;
}

}  // namespace

bool ReadsOtherDebugFile(const llvm::object::ObjectFile& object, const std::string& debug_path) {
  return HasDebuglink(object) || HasOtherBuildIdDebugFile(object, debug_path);
}

uint32_t InlineDepthSpan::DepthAt(uint64_t vaddr) const {
  auto next = std::upper_bound(steps.begin(), steps.end(), vaddr,
                               [](uint64_t a, const Step& s) { return a < s.vaddr; });
  return next == steps.begin() ? 0 : std::prev(next)->depth;
}

void InlineSpanIndex::Adopt(const std::string& debug_path,
                            llvm::object::OwningBinary<llvm::object::ObjectFile> binary,
                            std::unique_ptr<llvm::DWARFContext> context) {
  std::unique_ptr<Module> module;
  if (!ReadsOtherDebugFile(*binary.getBinary(), debug_path)) {
    llvm::DWARFContext* raw_context = context.get();
    auto symbolizable = llvm::symbolize::SymbolizableObjectFile::create(
        binary.getBinary(), std::move(context), /*UntagAddresses=*/false);
    if (!symbolizable) {
      llvm::consumeError(symbolizable.takeError());
      modules_[debug_path] = nullptr;  // LLVMSymbolizer answers, per address
      return;
    }
    module = std::make_unique<Module>();
    module->binary = std::move(binary);
    module->symbolizable = std::move(*symbolizable);
    module->context = raw_context;
  }
  modules_[debug_path] = std::move(module);
}

std::shared_ptr<const InlineDepthSpan> InlineSpanIndex::SpanAt(const std::string& debug_path,
                                                               uint64_t vaddr) {
  auto adopted = modules_.find(debug_path);
  if (adopted == modules_.end() || adopted->second == nullptr) return nullptr;
  Module* module = adopted->second.get();
  auto cached = module->spans.upper_bound(vaddr);
  if (cached != module->spans.begin() && vaddr < std::prev(cached)->second->end) {
    return std::prev(cached)->second;
  }
  auto span = std::make_shared<InlineDepthSpan>();
  llvm::DWARFCompileUnit* unit = module->context->getCompileUnitForCodeAddress(vaddr);
  if (unit == nullptr) {
    // Depth 0 up to the next unit's code (and back to the previous one's end).
    span->begin = 0;
    span->end = UINT64_MAX;
    for (const auto& [lo, hi] : UnitRanges(*module->context, module->unit_ranges)) {
      if (hi <= vaddr) span->begin = std::max(span->begin, hi);
      if (lo > vaddr) span->end = std::min(span->end, lo);
      if (lo <= vaddr && vaddr < hi) return nullptr;  // the index and LLVM disagree: decline
    }
    span->steps.push_back({span->begin, 0});
  } else {
    if (unit->getDWOId()) return nullptr;  // split DWARF: LLVM reads the .dwo, ask it per address
    llvm::DWARFDie innermost = unit->getSubroutineForAddress(vaddr);
    if (!innermost) {
      span->begin = vaddr;  // no function here: no inlined frames, for this address at least
      span->end = vaddr + 1;
      span->steps.push_back({vaddr, 0});
    } else {
      llvm::DWARFDie function = innermost;
      while (function && !function.isSubprogramDIE()) function = function.getParent();
      if (!function) return nullptr;
      auto ranges = function.getAddressRanges();
      if (!ranges) {
        llvm::consumeError(ranges.takeError());
        return nullptr;
      }
      auto holding = std::find_if(ranges->begin(), ranges->end(), [&](const auto& range) {
        return range.LowPC <= vaddr && vaddr < range.HighPC;
      });
      if (holding == ranges->end()) return nullptr;
      const uint64_t lo = holding->LowPC, hi = holding->HighPC;
      std::map<uint64_t, uint32_t> painting{{lo, 0}, {hi, kUnpainted}};
      PaintChildren(function, 0, lo, hi, painting);
      span->begin = lo;
      span->end = hi;
      for (const auto& [at, depth] : painting) {
        if (at >= hi) break;
        if (span->steps.empty() || span->steps.back().depth != depth) span->steps.push_back({at, depth});
      }
    }
  }
  module->spans[span->begin] = span;
  return span;
}

bool InlineSpanIndex::Symbolize(const std::string& debug_path, uint64_t vaddr,
                                llvm::DIInliningInfo* info) {
  auto adopted = modules_.find(debug_path);
  if (adopted == modules_.end() || adopted->second == nullptr) return false;
  *info = InlinedFramesLikeLlvm(*adopted->second->symbolizable, vaddr);
  return true;
}

bool InlineSpanIndex::AnswersFromOwnFile(const std::string& debug_path, uint64_t vaddr) {
  auto adopted = modules_.find(debug_path);
  if (adopted == modules_.end() || adopted->second == nullptr) return false;
  llvm::DWARFCompileUnit* unit = adopted->second->context->getCompileUnitForCodeAddress(vaddr);
  return unit == nullptr || !unit->getDWOId();
}

}  // namespace ptscope::symbols
