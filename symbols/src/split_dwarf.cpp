#include "split_dwarf.h"

#include <llvm/DebugInfo/DWARF/DWARFContext.h>
#include <llvm/DebugInfo/DWARF/DWARFUnit.h>
#include <llvm/DebugInfo/Symbolize/SymbolizableObjectFile.h>

#include <filesystem>
#include <system_error>

#include "llvm_frames.h"

namespace ptscope::symbols {
namespace fs = std::filesystem;

bool RelativeDwoSymbolizer::Offer(const std::string& debug_path,
                                  llvm::object::OwningBinary<llvm::object::ObjectFile>& binary,
                                  std::unique_ptr<llvm::DWARFContext>& context) {
  std::error_code ec;
  if (fs::exists(debug_path + ".dwp", ec)) return false;  // LLVM's own lookup finds it
  fs::path base = fs::canonical(debug_path, ec).parent_path();
  if (ec) return false;
  bool helped = false;
  for (const auto& unit : context->compile_units()) {
    // A DWARF 5 unit says in its header whether it is a skeleton (the only kind that names a
    // .dwo): the others need no DIE, whose abbreviations would be parsed for every unit of the
    // module (most of a small capture's start-up for a libc). Before version 5 only the unit
    // DIE tells (DW_AT_GNU_dwo_name).
    if (unit->getVersion() >= 5 && unit->getUnitType() != llvm::dwarf::DW_UT_skeleton) continue;
    llvm::DWARFDie die = unit->getUnitDIE();
    std::optional<const char*> dwo_name = llvm::dwarf::toString(
        die.find({llvm::dwarf::DW_AT_dwo_name, llvm::dwarf::DW_AT_GNU_dwo_name}));
    if (!dwo_name || fs::path(*dwo_name).is_absolute()) continue;
    const char* comp_dir = unit->getCompilationDir();
    fs::path dir = comp_dir != nullptr ? fs::path(comp_dir) : fs::path();
    if (dir.is_absolute()) continue;  // LLVM looks there itself
    fs::path dwo = (base / dir / *dwo_name).lexically_normal();
    if (!fs::is_regular_file(dwo, ec)) continue;
    llvm::DWARFDie split = unit->getNonSkeletonUnitDIE(false, dwo.string());
    helped |= split.isValid() && split.getDwarfUnit()->isDWOUnit();
  }
  if (!helped) return false;
  auto symbolizable = llvm::symbolize::SymbolizableObjectFile::create(
      binary.getBinary(), std::move(context), /*UntagAddresses=*/false);
  if (!symbolizable) {
    llvm::consumeError(symbolizable.takeError());
    return true;  // the context is gone: nobody else can use it either (LLVMSymbolizer answers)
  }
  auto module = std::make_unique<Module>();
  module->binary = std::move(binary);
  module->symbolizable = std::move(*symbolizable);
  modules_.emplace(debug_path, std::move(module));
  return true;
}

bool RelativeDwoSymbolizer::Symbolize(const std::string& debug_path, uint64_t vaddr,
                                      llvm::DIInliningInfo* info) {
  auto it = modules_.find(debug_path);
  if (it == modules_.end()) return false;
  *info = InlinedFramesLikeLlvm(*it->second->symbolizable, vaddr);
  return true;
}

}  // namespace ptscope::symbols
