// Fetches executables and debug info by build id from debuginfod servers (elfutils
// libdebuginfod; http, https and file:// URLs), through the library's cache
// (DEBUGINFOD_CACHE_PATH or ~/.cache/debuginfod_client).
//
// Privacy: nothing touches the network unless a URL was configured, either explicitly
// (pt-decode --debuginfod URL) or through DEBUGINFOD_URLS. Without one the fetcher is disabled and
// never calls the library.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ptscope/result.h"

namespace ptscope::symbols {

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

}  // namespace ptscope::symbols
