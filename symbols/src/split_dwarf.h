// Split DWARF units whose DW_AT_comp_dir is relative ("." after -fdebug-prefix-map, reproducible
// builds): LLVM resolves "<comp_dir>/<dwo_name>" against the decoder's working directory, so the
// .dwo beside the binary is missed and inlined frames and lines are lost. For such modules this
// builds the DWARF context itself, hands LLVM the .dwo found relative to the debug file's real
// directory (DWARFUnit's alternative DWO location) and symbolizes through that context.
#pragma once

#include <llvm/DebugInfo/DIContext.h>
#include <llvm/DebugInfo/DWARF/DWARFContext.h>
#include <llvm/DebugInfo/Symbolize/SymbolizableModule.h>
#include <llvm/Object/ObjectFile.h>

#include <memory>
#include <string>
#include <unordered_map>

namespace ptscope::symbols {

class RelativeDwoSymbolizer {
 public:
  // Looks at `debug_path`'s DWARF (built once by the caller, which other readers then share):
  // when it is such a module, takes the binary and the context and returns true; else leaves
  // both to the caller.
  bool Offer(const std::string& debug_path,
             llvm::object::OwningBinary<llvm::object::ObjectFile>& binary,
             std::unique_ptr<llvm::DWARFContext>& context);
  // True when `debug_path` was taken by Offer; `info` then holds the frames (innermost first,
  // names demangled). False: ask LLVMSymbolizer as usual. Not thread-safe (the caller locks).
  bool Symbolize(const std::string& debug_path, uint64_t vaddr, llvm::DIInliningInfo* info);

 private:
  struct Module {
    llvm::object::OwningBinary<llvm::object::ObjectFile> binary;
    std::unique_ptr<llvm::symbolize::SymbolizableModule> symbolizable;
  };
  std::unordered_map<std::string, std::unique_ptr<Module>> modules_;  // the modules taken
};

}  // namespace ptscope::symbols
