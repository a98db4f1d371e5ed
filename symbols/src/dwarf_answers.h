// A module's answers from its DWARF, kept between runs: inlined-depth spans (InlineDepths) and
// inlined frames with names and lines (Symbolize), per debug file.
//
// Why: on a warm run of a small capture, opening libc's DWARF again — LLVM reading the DIEs of
// every unit touched, its line tables, and its symbol table for SymbolizableObjectFile — was
// about 15 ms, 40% of the decode, for answers that depend on nothing but the debug file.
//
// Filled lazily: the Symbolizer asks this first; an address not answered here goes to the DWARF
// as before, and its answer is added. Only answers taken from the debug file alone are added
// (see Symbolizer: not split DWARF, not LLVMSymbolizer's own look-up of another file).
//
// On disk: the SectionCache file "<build id>/table.dwarf_answers", whose header holds the size
// and xxh3-64 of the whole debug file (any change to it discards the answers). Layout of the
// payload (section_cache.h): all little-endian uint64 —
//   version (1); span count, then per span: begin, end, step count, then (vaddr, depth) per step;
//   address count, then per address: vaddr, frame count, then per frame (innermost first): line,
//   start address + 1 (0: none), function name and file name, each as byte length + bytes.
// A payload that does not parse exactly (another version, cut short, counts beyond its length,
// trailing bytes, unsorted steps) is ignored as a whole and replaced when answers are added.
// Writers replace the whole file (temporary name + rename): a reader sees one writer's file or
// another's, never a mix; two decoders running at once may each drop the other's additions,
// which the next run adds again.
#pragma once

#include <llvm/DebugInfo/DIContext.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "ptscope/symbols.h"
#include "section_cache.h"

namespace ptscope::symbols {

class DwarfAnswers {
 public:
  // The answers cached for the debug file with `build_id` and `source` (none when the cache is
  // off, or its file is missing, stale or damaged).
  DwarfAnswers(const SectionCache* cache, std::string build_id, SectionCache::Source source);
  // Writes the answers when some were added.
  ~DwarfAnswers();
  DwarfAnswers(const DwarfAnswers&) = delete;
  DwarfAnswers& operator=(const DwarfAnswers&) = delete;

  // The span cached around `vaddr` (found as InlineSpanIndex finds its own), or nullptr.
  std::shared_ptr<const InlineDepthSpan> SpanAt(uint64_t vaddr) const;
  // The inlined frames cached for `vaddr`, or nullptr.
  const llvm::DIInliningInfo* FramesAt(uint64_t vaddr) const;
  void AddSpan(std::shared_ptr<const InlineDepthSpan> span);
  void AddFrames(uint64_t vaddr, const llvm::DIInliningInfo& frames);
  // Writes the file now when answers were added since it was read or last written.
  void Save();

  // The payload format (above), for the cache and its tests.
  std::string Pack() const;
  bool Unpack(llvm::StringRef bytes);  // false: not a whole, valid payload (nothing kept)
  size_t spans() const { return spans_.size(); }
  size_t addresses() const { return frames_.size(); }

 private:
  const SectionCache* cache_;
  std::string build_id_;
  SectionCache::Source source_;
  std::map<uint64_t, std::shared_ptr<const InlineDepthSpan>> spans_;  // by begin
  std::unordered_map<uint64_t, llvm::DIInliningInfo> frames_;
  bool added_ = false;
};

}  // namespace ptscope::symbols
