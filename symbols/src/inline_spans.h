// Inlined-call depth by function instead of by instruction.
//
// The decoder needs the inlined depth of every instruction it walks (to open and close inlined
// slices inside a block). Asking LLVMSymbolizer per instruction builds names, lines and
// demangled strings for each one; this index instead walks a function's DWARF tree once and
// records where the depth changes, so a block needs one look-up. Where the answer could differ
// from LLVMSymbolizer's (split DWARF, debug info LLVM would take from another file, trees that do
// not nest), it declines and the caller asks per address as before.
#pragma once

#include <llvm/DebugInfo/DIContext.h>
#include <llvm/DebugInfo/DWARF/DWARFContext.h>
#include <llvm/DebugInfo/Symbolize/SymbolizableModule.h>
#include <llvm/Object/ObjectFile.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ptscope/symbols.h"

namespace ptscope::symbols {

using RangeList = std::vector<std::pair<uint64_t, uint64_t>>;

// Whether LLVMSymbolizer would read debug info from a file other than `debug_path` for this
// object (a .gnu_debuglink, or another file under /usr/lib/debug/.build-id): Adopt declines then.
bool ReadsOtherDebugFile(const llvm::object::ObjectFile& object, const std::string& debug_path);

class InlineSpanIndex {
 public:
  // Takes the module's binary and DWARF context (built once by the caller), unless LLVMSymbolizer
  // would read another file's debug info for it (then SpanAt declines).
  void Adopt(const std::string& debug_path,
             llvm::object::OwningBinary<llvm::object::ObjectFile> binary,
             std::unique_ptr<llvm::DWARFContext> context);
  // The span around `vaddr` of the module whose debug info is `debug_path`, or nullptr when this
  // index cannot answer for it (not adopted, or declined). Not thread-safe (Symbolizer locks).
  std::shared_ptr<const InlineDepthSpan> SpanAt(const std::string& debug_path, uint64_t vaddr);
  // Names and lines for an adopted module, from the same DWARF context (so that a module's debug
  // sections are decompressed and parsed once, not once here and once in LLVMSymbolizer): frames
  // innermost first, names demangled, as LLVMSymbolizer::symbolizeInlinedCode gives them. False
  // when the module was not adopted (ask LLVMSymbolizer).
  bool Symbolize(const std::string& debug_path, uint64_t vaddr, llvm::DIInliningInfo* info);
  // Whether Symbolize's answer for `vaddr` comes from the module's own file alone: it was
  // adopted, and the unit holding `vaddr`, if any, is not a split-DWARF skeleton (whose .dwo LLVM
  // reads). Only such answers may be kept per debug file (DwarfAnswers).
  bool AnswersFromOwnFile(const std::string& debug_path, uint64_t vaddr);

 private:
  struct Module {
    llvm::object::OwningBinary<llvm::object::ObjectFile> binary;
    std::unique_ptr<llvm::symbolize::SymbolizableModule> symbolizable;  // owns the context
    llvm::DWARFContext* context = nullptr;
    std::optional<RangeList> unit_ranges;  // [lo, hi) of every unit, sorted; read when needed
    std::map<uint64_t, std::shared_ptr<const InlineDepthSpan>> spans;  // by begin
  };
  std::unordered_map<std::string, std::unique_ptr<Module>> modules_;  // nullptr: declined
};

}  // namespace ptscope::symbols
