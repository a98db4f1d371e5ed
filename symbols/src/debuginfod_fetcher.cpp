// libdebuginfod client (see debuginfod_fetcher.h).
#include "debuginfod_fetcher.h"

#include <elfutils/debuginfod.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "ptscope/format.h"

namespace ptscope::symbols {
namespace {

struct Deadline {
  std::chrono::steady_clock::time_point until;
};

// Called by the library during transfers: a non-zero return cancels the request.
int CancelAfterDeadline(debuginfod_client* client, long, long) {
  auto* deadline = static_cast<Deadline*>(debuginfod_get_user_data(client));
  return deadline != nullptr && std::chrono::steady_clock::now() > deadline->until ? 1 : 0;
}

// The library reads its server list only from the environment: set it for the duration of a
// request and put the previous value back (requests are serialized by the fetcher's mutex).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

DebuginfodFetcher::DebuginfodFetcher(DebuginfodOptions options)
    : timeout_seconds_(options.timeout_seconds == 0 ? 30 : options.timeout_seconds) {
  for (const std::string& url : options.urls) {
    if (url.empty()) continue;
    if (!urls_.empty()) urls_ += ' ';
    urls_ += url;
  }
}

DebuginfodFetcher DebuginfodFetcher::FromEnvironment(DebuginfodOptions options) {
  if (options.urls.empty()) {
    const char* env = std::getenv(DEBUGINFOD_URLS_ENV_VAR);
    if (env != nullptr && std::strspn(env, " \t") != std::strlen(env)) options.urls.push_back(env);
  }
  return DebuginfodFetcher(std::move(options));
}

Result<std::string> DebuginfodFetcher::FetchExecutable(const std::vector<uint8_t>& build_id) {
  return Fetch(build_id, false);
}

Result<std::string> DebuginfodFetcher::FetchDebugInfo(const std::vector<uint8_t>& build_id) {
  return Fetch(build_id, true);
}

Result<std::string> DebuginfodFetcher::Fetch(const std::vector<uint8_t>& build_id, bool debuginfo) {
  const char* what = debuginfo ? "debuginfo" : "executable";
  if (!enabled()) {
    return Unexpected(Errc::kNotFound, "debuginfod: no server configured (set DEBUGINFOD_URLS "
                                       "or pass --debuginfod URL)");
  }
  std::string hex = format::ToHex(build_id);
  if (build_id.empty()) return Unexpected(Errc::kNotFound, "debuginfod: the module has no build id");
  std::lock_guard<std::mutex> lock(mutex_);
  std::string key = (debuginfo ? "d" : "e") + hex;
  if (failed_.count(key) != 0) {
    return Unexpected(Errc::kNotFound, "debuginfod: " + std::string(what) + " of build id " + hex +
                                           " not found (asked before)");
  }
  ScopedEnv urls(DEBUGINFOD_URLS_ENV_VAR, urls_);
  ScopedEnv timeout(DEBUGINFOD_TIMEOUT_ENV_VAR, std::to_string(timeout_seconds_));
  debuginfod_client* client = debuginfod_begin();
  if (client == nullptr) return Unexpected(Errc::kInternal, "debuginfod: cannot start a client");
  Deadline deadline{std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds_)};
  debuginfod_set_user_data(client, &deadline);
  debuginfod_set_progressfn(client, CancelAfterDeadline);
  char* path = nullptr;
  ++library_calls_;
  int fd = debuginfo ? debuginfod_find_debuginfo(client, build_id.data(),
                                             static_cast<int>(build_id.size()), &path)
                 : debuginfod_find_executable(client, build_id.data(),
                                              static_cast<int>(build_id.size()), &path);
  debuginfod_end(client);
  if (fd < 0) {
    failed_.insert(key);
    std::free(path);
    return Unexpected(fd == -ENOENT ? Errc::kNotFound : Errc::kIo,
                      "debuginfod: " + std::string(what) + " of build id " + hex + " from " +
                          urls_ + ": " + std::strerror(-fd));
  }
  ::close(fd);
  std::string result = path != nullptr ? path : "";
  std::free(path);
  if (result.empty()) return Unexpected(Errc::kInternal, "debuginfod: the library gave no path");
  return result;
}

}  // namespace ptscope::symbols
