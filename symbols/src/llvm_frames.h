// Inlined frames from a SymbolizableModule we built ourselves, as LLVMSymbolizer would give them:
// absolute file paths, linkage names (the symbol table where DWARF has none), one empty frame
// when nothing is known, names demangled. Shared by the readers that own a module's DWARF
// context (split_dwarf.h, inline_spans.h).
#pragma once

#include <llvm/DebugInfo/DIContext.h>
#include <llvm/DebugInfo/Symbolize/SymbolizableModule.h>
#include <llvm/Demangle/Demangle.h>

namespace ptscope::symbols {

inline llvm::DIInliningInfo InlinedFramesLikeLlvm(const llvm::symbolize::SymbolizableModule& module,
                                                  uint64_t vaddr) {
  llvm::DILineInfoSpecifier spec(llvm::DILineInfoSpecifier::FileLineInfoKind::AbsoluteFilePath,
                                 llvm::DILineInfoSpecifier::FunctionNameKind::LinkageName);
  llvm::DIInliningInfo info = module.symbolizeInlinedCode(
      {vaddr, llvm::object::SectionedAddress::UndefSection}, spec, /*UseSymbolTable=*/true);
  if (info.getNumberOfFrames() == 0) info.addFrame(llvm::DILineInfo());
  for (uint32_t i = 0; i < info.getNumberOfFrames(); ++i) {
    llvm::DILineInfo* frame = info.getMutableFrame(i);
    frame->FunctionName = llvm::demangle(frame->FunctionName);
  }
  return info;
}

}  // namespace ptscope::symbols
