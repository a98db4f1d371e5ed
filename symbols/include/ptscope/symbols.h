// Symbols: ELF facts, finding a module's files by build id (and fetching them from debuginfod),
// time-versioned process address spaces, a symbolizer facade over LLVM and JIT code (jitdump,
// perf maps). Used by pt-decode to give code bytes to libipt and
// names to slices. Nothing here prints; failures are values or per-module notes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ptscope/format.h"
#include "ptscope/result.h"

namespace ptscope::symbols {

// ---------------------------------------------------------------------------------------------
// ELF facts

struct LoadSegment {
  uint64_t vaddr = 0;
  uint64_t memsz = 0;
  uint64_t offset = 0;  // file offset
  uint64_t filesz = 0;
  bool executable = false;
};

struct ElfInfo {
  std::vector<uint8_t> build_id;       // empty when the file has no NT_GNU_BUILD_ID note
  std::vector<LoadSegment> segments;   // PT_LOAD, in file order
  uint64_t entry = 0;                  // e_entry: where a process running this file starts
  bool has_symtab = false;             // .symtab present (not stripped)
  bool has_debug_info = false;         // .debug_info present
  bool code_is_nobits = false;         // .text is SHT_NOBITS: a separate debug file
  std::string debuglink;               // .gnu_debuglink file name, empty when absent
  uint32_t debuglink_crc = 0;          // its CRC-32 of the debug file (valid with debuglink)
};

// Reads the ELF facts of `path`. kBadMagic when it is not a 64-bit little-endian ELF.
Result<ElfInfo> ReadElfInfo(const std::string& path);

// CRC-32 (zlib's, as .gnu_debuglink uses) of the whole file; kIo when unreadable.
Result<uint32_t> FileCrc32(const std::string& path);

// ELF virtual address of the byte at `file_offset`, through the PT_LOAD that maps it.
std::optional<uint64_t> FileOffsetToVaddr(const ElfInfo& elf, uint64_t file_offset);

// ---------------------------------------------------------------------------------------------
// debuginfod
//
// Fetches executables and debug info by build id from debuginfod servers (elfutils
// libdebuginfod; http, https and file:// URLs), through the library's cache
// (DEBUGINFOD_CACHE_PATH or ~/.cache/debuginfod_client).
//
// Privacy: nothing touches the network unless a URL was configured, either explicitly
// (pt-decode --debuginfod URL) or through DEBUGINFOD_URLS. Without one the fetcher is disabled and
// never calls the library.

struct DebuginfodOptions {
  std::vector<std::string> urls;  // explicit URLs; empty: DEBUGINFOD_URLS from the environment
  unsigned timeout_seconds = 30;  // per request, whole transfer
};

// One download's progress, for a terminal line (see DebuginfodProgressLine).
struct DebuginfodProgress {
  std::string module;    // file name of the module, or the build id when unknown
  const char* artifact;  // "executable" or "debuginfo"
  long bytes = 0;        // received so far
  long total = 0;        // expected size, <= 0 when the server did not say
  bool finished = false; // the last report of this download
  bool found = false;    // with finished: the file arrived
};
using DebuginfodProgressFn = std::function<void(const DebuginfodProgress&)>;

// "\rdebuginfod: libc.so.6 executable: 1.2 of 1.9 MiB" + erase-to-end-of-line, and a final
// newline when finished: one updating terminal line per download.
std::string DebuginfodProgressLine(const DebuginfodProgress& progress);

class DebuginfodFetcher {
 public:
  // Process-wide set-up, from main() BEFORE any thread starts. libdebuginfod 0.188 reads its
  // server list only from DEBUGINFOD_URLS, and setenv() is not thread-safe: this puts the list
  // (`urls`, or the inherited variable when empty) there once, so that fetchers with the same
  // URLs never touch the environment. `progress` (may be empty) receives every download's
  // progress; main() passes a terminal printer only when stderr is a terminal.
  static void SetUpProcess(const std::vector<std::string>& urls, DebuginfodProgressFn progress);

  explicit DebuginfodFetcher(DebuginfodOptions options);
  // Reads DEBUGINFOD_URLS when options.urls is empty.
  static DebuginfodFetcher FromEnvironment(DebuginfodOptions options);

  bool enabled() const { return !urls_.empty(); }
  const std::string& urls() const { return urls_; }  // space-separated, as the library wants
  // Path of the cached file. kNotFound when no server has it (each build id asked once).
  // `module` (the recorded path) names the download in progress reports. Thread-safe; fetchers
  // whose URLs equal the environment's (see SetUpProcess) download concurrently.
  Result<std::string> FetchExecutable(const std::vector<uint8_t>& build_id,
                                      const std::string& module = {});
  Result<std::string> FetchDebugInfo(const std::vector<uint8_t>& build_id,
                                     const std::string& module = {});
  uint64_t library_calls() const { return library_calls_.load(); }  // for tests: 0 while disabled

 private:
  Result<std::string> Fetch(const std::vector<uint8_t>& build_id, bool debuginfo,
                            const std::string& module);
  Result<std::string> CallLibrary(const std::vector<uint8_t>& build_id, bool debuginfo,
                                  const std::string& module);

  std::string urls_;
  unsigned timeout_seconds_;
  std::mutex mutex_;               // guards failed_ only: downloads run concurrently
  std::set<std::string> failed_;  // "e"/"d" + hex build id: not asked again
  std::atomic<uint64_t> library_calls_{0};
};

// ---------------------------------------------------------------------------------------------
// Finding a module's files

// Where a module's code bytes and debug info live (they may be different files).
struct ModuleFiles {
  std::string code_path;   // bytes libipt reads; empty when not found
  std::string debug_path;  // file with symbols/DWARF for the symbolizer; may equal code_path
  ElfInfo code_elf;        // facts of code_path (valid when code_path is set)
  std::string code_origin; // "archive", "recorded path", "--symbols DIR", "--symbols", "debuginfod"
  // Where debug_path came from: "archive", "--symbols DIR" (its .build-id tree),
  // "/usr/lib/debug", "--symbols" (found by build id below a --symbols directory),
  // ".gnu_debuglink", "debuginfod", or "code file" (debug_path is the code file itself).
  std::string debug_origin;
  // The DWARF package LLVM reads beside debug_path (see AttachDwp), empty when none.
  std::string dwp_path;
};

// Finds files by build id: an embedded archive copy, then the recorded path (only if its build
// id matches), then each --symbols directory (".build-id/xx/rest[.debug]" layout, then every ELF
// file below it indexed by its own build id), then /usr/lib/debug for debug info, then the
// binary's .gnu_debuglink (beside it, in .debug/, under /usr/lib/debug/<dir>, in --symbols;
// CRC-32 checked, a stale file is refused with a note). A file whose
// build id differs from the capture's is never used; the refusal is kept as a note naming the
// file and both build ids (also for a file in --symbols named like the module or its debug file,
// when the module's code or symbols were not found).
// Split DWARF: a DWARF package found as "<recorded path>.dwp", "<code file>.dwp" or by that name
// in a --symbols directory is presented to LLVM as "<debug_path>.dwp" (see AttachDwp).
class ModuleResolver {
 public:
  // Blobs are written under a private temp dir, removed by the destructor or, when the process
  // was killed, by the next resolver that needs one (module_resolver.cpp says how).
  ModuleResolver(std::vector<std::string> symbol_dirs);
  ~ModuleResolver();
  ModuleResolver(const ModuleResolver&) = delete;
  ModuleResolver& operator=(const ModuleResolver&) = delete;

  // Where an embedded blob's bytes come from (format::LoadBlobData reads them again from the
  // archive).
  using BlobLoader = std::function<Result<std::vector<uint8_t>>()>;
  // Makes an embedded kElf / kDebugInfo / kVdso blob available. A binary or debug file is loaded
  // and written to the temp dir only when a module with its build id is resolved, so that an
  // archive of many large blobs costs one at a time, and only those the decode uses; a vdso (a
  // few KiB) at once.
  Status AddBlob(const format::BlobChunk& blob, BlobLoader load);
  // The same, with the bytes in blob.data.
  Status AddBlob(const format::BlobChunk& blob);
  // Resolves (and caches) a module. An empty build id accepts the recorded path as it is.
  const ModuleFiles& Resolve(const std::string& recorded_path, const std::vector<uint8_t>& build_id);
  // Asks `fetcher` (when enabled) last, for code and for debug info; it must outlive this.
  void SetDebuginfod(DebuginfodFetcher* fetcher) { debuginfod_ = fetcher; }
  // Path of the extracted vdso of `pid` (or of any process when none matches), empty if none.
  std::string VdsoPath(uint32_t pid) const;
  // Human notes: rebuilt binaries refused, unreadable files. Each note once.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  struct Candidate {
    std::string path;
    ElfInfo elf;
  };
  void ScanSymbolDirs();
  void NoteRefused(const std::string& path, const std::vector<uint8_t>& file_id,
                   const std::string& recorded_path, const std::vector<uint8_t>& build_id);
  void NoteRefusedByName(const std::string& recorded_path, const std::vector<uint8_t>& build_id);
  std::optional<Candidate> Probe(const std::string& path, const std::vector<uint8_t>& build_id,
                                 bool report_mismatch);
  std::string FindDebugFile(const Candidate& code, const std::vector<uint8_t>& build_id,
                            const std::string& recorded_path, std::string& origin);
  std::string WriteTemp(const std::string& name, const std::vector<uint8_t>& data);
  std::string FindDebuglinkFile(const Candidate& code, const std::vector<uint8_t>& build_id,
                                const std::string& recorded_path);
  bool EnsureTempDir();
  std::string AttachDwp(const std::string& debug_path, const std::string& hex,
                        const std::string& recorded_path, const std::string& code_path,
                        std::string& dwp_path);
  void Note(std::string note);

  std::vector<std::string> symbol_dirs_;
  std::string temp_dir_;
  int temp_dir_lock_ = -1;  // an open descriptor of temp_dir_ holding its flock
  struct Embedded {
    BlobLoader load;
    std::string path;    // the temp file, once written
    bool tried = false;  // loaded (or failed to) already
  };
  // The temp file of an embedded blob with build id `hex`, written on first use; "" when there
  // is none or it could not be loaded (a note says why).
  std::string EmbeddedPath(std::map<std::string, Embedded>& blobs, const std::string& hex,
                           const char* suffix);
  std::map<std::string, Embedded> embedded_code_;   // hex build id -> blob
  std::map<std::string, Embedded> embedded_debug_;  // hex build id -> blob
  std::map<uint32_t, std::string> vdso_by_pid_;
  bool scanned_ = false;
  std::multimap<std::string, std::string> scanned_files_;  // hex build id -> path
  // file name -> (path, build id) of every ELF file found there
  std::multimap<std::string, std::pair<std::string, std::vector<uint8_t>>> scanned_by_name_;
  std::map<std::string, std::string> scanned_dwp_;         // "name.dwp" -> first path found
  std::map<std::string, ModuleFiles> cache_;               // path + '\0' + hex build id
  std::vector<std::string> notes_;
  DebuginfodFetcher* debuginfod_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Address spaces over time
//
// Each process has a list of mappings, each valid over [valid_from, valid_until):
//
//   time ──────────────────────────────────────────────────────────────────────►
//   pid 10  a.out   [0x400000,0x401000)  ├────────────────────────┤ exec clears
//           libc    [0x7f00..)                ├───────────────────┤
//           dlopen  libx.so                          ├────────────┤
//   pid 11  (FORK of 10 at t1: copies every mapping live at t1)  ├──────────►
//
// A new mapping ends (and splits) the parts of older mappings it overlaps at that time.
struct Module {
  std::string path;
  std::vector<uint8_t> build_id;
};

struct Mapping {
  uint64_t start = 0, end = 0;  // [start, end)
  uint64_t pgoff = 0;           // file offset of `start`
  uint32_t module = 0;          // index into AddressSpace::modules()
  uint64_t valid_from = 0, valid_until = UINT64_MAX;
};

class AddressSpace {
 public:
  uint32_t InternModule(const std::string& path, const std::vector<uint8_t>& build_id);
  void Map(uint32_t pid, uint64_t time_ns, uint64_t start, uint64_t len, uint64_t pgoff,
           uint32_t module);
  void Exec(uint32_t pid, uint64_t time_ns);
  void Fork(uint32_t parent_pid, uint32_t child_pid, uint64_t time_ns);
  // The mapping holding `address` in `pid` at `time_ns`, or nullptr.
  const Mapping* Lookup(uint32_t pid, uint64_t address, uint64_t time_ns) const;
  // Every mapping of `pid` (all times), in the order they were added.
  const std::vector<Mapping>& MappingsOf(uint32_t pid) const;
  const std::vector<Module>& modules() const { return modules_; }

 private:
  std::unordered_map<uint32_t, std::vector<Mapping>> by_pid_;
  std::vector<Module> modules_;
  std::map<std::pair<std::string, std::vector<uint8_t>>, uint32_t> module_index_;
};

// ---------------------------------------------------------------------------------------------
// Symbolizer

struct SourceFrame {
  std::string function;  // demangled
  std::string file;
  uint32_t line = 0;
};

struct Symbol {
  bool found = false;
  std::string function;           // demangled name of the (outermost) function
  uint64_t function_start = 0;    // ELF vaddr of its entry, 0 when unknown
  std::string file;
  uint32_t line = 0;
  std::vector<SourceFrame> inlined;  // inlined frames at the address, outermost first
};

// Inlined-call depths over a stretch of code: for every vaddr a in [begin, end),
// Symbolizer::Symbolize(path, a).inlined.size() equals DepthAt(a), the depth of the last step at
// or before a.
struct InlineDepthSpan {
  struct Step {
    uint64_t vaddr = 0;
    uint32_t depth = 0;
  };
  uint64_t begin = 0, end = 0;
  std::vector<Step> steps;  // sorted by vaddr, steps.front().vaddr == begin
  uint32_t DepthAt(uint64_t vaddr) const;
};

// Code of one module, [begin, end) in ELF vaddrs, whose functions are all named or all unnamed.
struct NamedStretch {
  uint64_t begin = 0, end = UINT64_MAX;
  bool named = false;
};

// Thread-safe facade over llvm::symbolize::LLVMSymbolizer plus per-module sorted tables of
// functions (symbols, PLT stubs, .eh_frame FDEs) for fast function starts. Addresses are ELF
// vaddrs of the debug file.
class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  // The binary whose code `debug_path` describes, when they are different files (a separate
  // debug file keeps .plt and .eh_frame as NOBITS): PLT stubs and FDEs are read from it. Without
  // this call they are read from `debug_path` itself.
  void SetCodeFile(const std::string& debug_path, const std::string& code_path);
  Symbol Symbolize(const std::string& debug_path, uint64_t vaddr);
  // The inlined depths of the function (or stretch without debug info) around `vaddr`, computed
  // once per function from the DWARF tree; nullptr where only Symbolize can tell (split DWARF,
  // debug info LLVM would read from another file): ask per address then.
  std::shared_ptr<const InlineDepthSpan> InlineDepths(const std::string& debug_path, uint64_t vaddr);
  // Entry of the function containing `vaddr`: its PLT stub or symbol (symbol table,
  // MiniDebugInfo), else, in stripped code, its .eh_frame FDE; 0 when unknown. A stripped
  // function thus has one entry wherever it is entered or returned to.
  uint64_t FunctionStart(const std::string& debug_path, uint64_t vaddr);
  // The function FunctionStart finds, as [start, end): its symbol's or FDE's size, an unsized
  // symbol up to the next symbol; {0, 0} when FunctionStart is 0 or only the start is known
  // (MiniDebugInfo). Every address in [start, end) has FunctionStart == start.
  std::pair<uint64_t, uint64_t> FunctionRange(const std::string& debug_path, uint64_t vaddr);
  // The stretch around `vaddr` whose code is all in named functions (Symbolize finds them: a
  // symbol or PLT stub covers them) or all in unnamed ones (FDEs without a symbol, code no table
  // knows). Padding between functions belongs to the function before it.
  NamedStretch NamedStretchAt(const std::string& debug_path, uint64_t vaddr);
  // Modules that failed to load (each once): "PATH: reason".
  std::vector<std::string> failures() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// JIT code
//
// JIT code over time, per process: code regions from jitdump LOAD/MOVE records (bytes, name,
// line table), each valid from its load time until a later LOAD or MOVE overlaps it, plus names
// from perf maps (no bytes, no time). Serves code bytes to the PT decoder and names to frames.
//
//   pid 7  [0x1000,0x1040) jit_add v1  ├──────────┤ replaced by a LOAD at t2
//          [0x1000,0x1060) jit_add v2             ├──────────────►
//          [0x2000,0x2020) jit_mul     ├────┤ MOVEd to 0x3000 at t1; [0x3000,..) ├─────►
//
// Thread-safe for concurrent const lookups once built.

struct JitDump;    // jitdump_reader.h
struct PerfMap;    // perf_map_reader.h
class JitTimeMap;  // jit_code_store.h

struct JitLineEntry {
  uint64_t address = 0;
  int32_t line = 0;
  int32_t discriminator = 0;  // V8 stores the column here
  std::string file;           // "\xff\0" entries are resolved to the previous file
};

struct PerfMapEntry {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string name;
};

struct JitRegion {
  uint64_t start = 0, end = 0;  // [start, end)
  uint64_t valid_from = 0, valid_until = UINT64_MAX;  // trace ns
  std::string name;
  std::shared_ptr<const std::vector<uint8_t>> code;         // end - start bytes
  std::shared_ptr<const std::vector<JitLineEntry>> lines;   // addresses as loaded (see delta)
  // Added to line-table addresses after MOVEs, modulo 2^64 (a chain of moves may go up and down
  // the address space; the sum of the steps, wrapped, is still where the code is now).
  uint64_t line_delta = 0;
  // Names this region's bytes at these addresses: unique among all regions of all stores of the
  // process (a LOAD, a MOVE's new copy and a reload at the same address each get their own), so
  // that decoded instructions can be cached per version of the code. 0: not from a store.
  uint64_t version = 0;
};

struct JitName {
  std::string name;
  uint64_t start = 0;   // entry of the function (region start)
  std::string file;     // from the jitdump line table, when present
  uint32_t line = 0;
  bool has_code = false;  // false: known only from a perf map
};

class JitCodeStore {
 public:
  // Adds the LOAD/MOVE history of one jitdump of `pid`.
  void AddJitdump(uint32_t pid, const JitDump& dump, const JitTimeMap& time);
  // Adds perf-map names of `pid` (used when no jitdump region holds the address).
  void AddPerfMap(uint32_t pid, const PerfMap& map);

  // The jitdump region holding `address` at `time_ns`. When none is valid exactly then (JIT
  // clocks are only approximately aligned with the trace), the region whose validity is closest
  // to `time_ns` is used.
  const JitRegion* Lookup(uint32_t pid, uint64_t address, uint64_t time_ns) const;
  // Copies up to `size` code bytes at `address` (never across the region's end); 0 if none.
  size_t ReadCode(uint32_t pid, uint64_t address, uint64_t time_ns, uint8_t* buffer,
                  size_t size) const;
  // The version (JitRegion::version) of the code ReadCode reads at `address` at `time_ns`: equal
  // versions, equal bytes (up to the same end); 0 when ReadCode reads nothing there.
  uint64_t CodeVersion(uint32_t pid, uint64_t address, uint64_t time_ns) const;
  // Name for `address`: jitdump first, then the perf map.
  std::optional<JitName> Name(uint32_t pid, uint64_t address, uint64_t time_ns) const;
  bool empty() const { return regions_.empty() && perf_maps_.empty(); }
  bool HasCode(uint32_t pid) const { return regions_.count(pid) != 0; }

  // Every kJitdump / kPerfMap blob of `archive`; damage goes to `notes` (one line each).
  static JitCodeStore FromArchive(const format::Archive& archive, std::vector<std::string>& notes);

 private:
  struct PidRegions {
    std::vector<JitRegion> regions;                // in load order
    std::multimap<uint64_t, size_t> by_start;      // start -> index
    uint64_t max_size = 0;
  };
  void Insert(PidRegions& pid_regions, JitRegion region);
  std::vector<size_t> Holding(const PidRegions& pid_regions, uint64_t address) const;

  std::unordered_map<uint32_t, PidRegions> regions_;
  std::unordered_map<uint32_t, std::map<uint64_t, PerfMapEntry>> perf_maps_;  // by start
};

}  // namespace ptscope::symbols
