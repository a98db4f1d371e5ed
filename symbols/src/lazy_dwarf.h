// A DWARFContext whose debug sections are read (and decompressed) only when LLVM first asks.
//
// llvm::DWARFContext::create(ObjectFile) decompresses every compressed debug section up front.
// The decoder asks a module for inlined frames, names and lines only, so sections such as
// .debug_loclists (a quarter of libc's compressed DWARF) were inflated for nothing; and the ones
// it reads come from the SectionCache when an earlier run inflated them.
//
// The object maps section names to LLVM's getters the way LLVM's own in-memory DWARFObject does.
// It serves only objects whose DWARF needs no relocating (executables, shared libraries, their
// debug files: LLVM applies relocations only to relocatable objects), so its relocation look-up
// finds none; for relocatable objects MakeLazyDwarfContext falls back to DWARFContext::create.
#pragma once

#include <llvm/DebugInfo/DWARF/DWARFContext.h>
#include <llvm/Object/ObjectFile.h>

#include <functional>
#include <memory>

#include "section_cache.h"

namespace ptscope::symbols {

// The context for `object`, which must outlive it. Errors (a section that does not decompress)
// go to `on_error` when the section is first asked for; the section then reads as empty, as in
// LLVM. `cache` may be null (no cache) and must outlive the context. Not thread-safe: use under
// one lock, as DWARFContext itself.
std::unique_ptr<llvm::DWARFContext> MakeLazyDwarfContext(
    const llvm::object::ObjectFile& object, const SectionCache* cache,
    std::function<void(llvm::Error)> on_error);

}  // namespace ptscope::symbols
