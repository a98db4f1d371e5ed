// An on-disk cache of decompressed debug sections, keyed by build id.
//
// Why: a distribution's debug files compress their DWARF (SHF_COMPRESSED, zlib or zstd). LLVM
// inflates each section whole before it can read one byte of it, and for libc that was about half
// of a small capture's decode (about 40 ms of CPU for .debug_info alone). Re-decoding is the
// common case (the same libc, many captures), so the inflated bytes are kept on disk and mapped
// the next time, which costs page-cache look-ups instead of inflation.
//
// Where: $PTSCOPE_DEBUG_CACHE when set ("off" or empty: no cache), else
// $XDG_CACHE_HOME/ptscope/debug-sections, else $HOME/.cache/ptscope/debug-sections. A directory
// this cache creates is 0700; one it finds is used only when the caller owns it and no one else
// may write to it (else the cache is off: another user could plant DWARF there). Files are 0600,
// written to a temporary name and renamed into place, so readers see a whole file or none.
//
// Layout: <dir>/<build id hex>/<section name without its dot>. Each file is a 32-byte header —
// "PTSCDSEC" (8 bytes), the compressed section's size, an xxh3-64 of its bytes (the compression
// header included) and the decompressed size, each a little-endian uint64 — then the
// decompressed bytes.
//
// Invalidation: a file is used only when its header matches the compressed section read from the
// debug file now (size and hash) and its length is the header's plus the decompressed size;
// otherwise the section is inflated again and the file replaced.
//
// Tables derived from a whole file are kept the same way, named "table.<what>", their header
// holding the size and xxh3-64 of the entire file they were computed from (so any change to it
// recomputes them): "table.symbols" (the symbolizer's sorted symbol tables, from the debug file)
// and "table.fde_ranges" (the .eh_frame FDE ranges, from the code file), as arrays of host-order
// uint64 pairs; "table.dwarf_answers" (inlined depths, names, lines and inlined frames, from the
// debug file, filled as code is decoded; a versioned payload, see dwarf_answers.h) and
// "table.plt_stubs" (the PLT stubs with their names, from the code file and checked against the
// debug file too; a versioned payload, see function_bounds.h). Nothing is ever evicted: delete
// the directory to reclaim the space (about 3x the compressed debug files decoded; 10 MB for
// Debian's libc). Files of modules without a build id are not cached.
#pragma once

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/MemoryBuffer.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace llvm::object {
class ObjectFile;
}

namespace ptscope::symbols {

// The object's GNU build id in lowercase hex; "" when it has none or its note segments lie
// beyond the file (LLVM's note reader would read outside it).
std::string BuildIdHex(const llvm::object::ObjectFile& object);

class SectionCache {
 public:
  // The directory from the environment (see above); disabled when none can be used.
  static SectionCache FromEnvironment();
  explicit SectionCache(std::string dir) : dir_(std::move(dir)) {}  // "" disables

  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }

  // What a cached file was computed from: the size and xxh3-64 of those bytes (a compressed
  // section, or a whole file for the tables). Computed once per file by callers that look up
  // several tables of it.
  struct Source {
    uint64_t size = 0, hash = 0;
  };
  static Source SourceOf(llvm::StringRef bytes);

  struct Hit {
    std::unique_ptr<llvm::MemoryBuffer> file;  // mapped when large; owns `bytes`
    llvm::StringRef bytes;                     // the decompressed section
  };
  // The decompressed bytes of `section` (e.g. ".debug_info") of the file with `build_id` (hex),
  // whose compressed bytes are `compressed`; nullopt when not cached or stale.
  std::optional<Hit> Find(const std::string& build_id, llvm::StringRef section,
                          llvm::StringRef compressed) const;
  // Stores them; failures (read-only or full disk, a race with another writer) are ignored:
  // the cache only saves time.
  void Store(const std::string& build_id, llvm::StringRef section, llvm::StringRef compressed,
             llvm::StringRef decompressed) const;
  // The same, for a source whose size and hash are known.
  std::optional<Hit> Find(const std::string& build_id, llvm::StringRef section,
                          Source source) const;
  void Store(const std::string& build_id, llvm::StringRef section, Source source,
             llvm::StringRef decompressed) const;

 private:
  std::string PathOf(const std::string& build_id, llvm::StringRef section) const;
  std::string dir_;
};

}  // namespace ptscope::symbols
