// Fetches executables and debug info by build id from debuginfod servers (elfutils
// libdebuginfod; http, https and file:// URLs), through the library's cache
// (DEBUGINFOD_CACHE_PATH or ~/.cache/debuginfod_client).
//
// Privacy: nothing touches the network unless a URL was configured, either explicitly
// (pt-decode --debuginfod URL) or through DEBUGINFOD_URLS. Without one the fetcher is disabled and
// never calls the library.
#pragma once

#include <cstdint>
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

class DebuginfodFetcher {
 public:
  explicit DebuginfodFetcher(DebuginfodOptions options);
  // Reads DEBUGINFOD_URLS when options.urls is empty.
  static DebuginfodFetcher FromEnvironment(DebuginfodOptions options);

  bool enabled() const { return !urls_.empty(); }
  const std::string& urls() const { return urls_; }  // space-separated, as the library wants
  // Path of the cached file. kNotFound when no server has it (each build id asked once).
  Result<std::string> FetchExecutable(const std::vector<uint8_t>& build_id);
  Result<std::string> FetchDebugInfo(const std::vector<uint8_t>& build_id);
  uint64_t library_calls() const { return library_calls_; }  // for tests: 0 while disabled

 private:
  Result<std::string> Fetch(const std::vector<uint8_t>& build_id, bool debuginfo);

  std::string urls_;
  unsigned timeout_seconds_;
  std::mutex mutex_;
  std::set<std::string> failed_;  // "e"/"d" + hex build id: not asked again
  uint64_t library_calls_ = 0;
};

}  // namespace ptscope::symbols
