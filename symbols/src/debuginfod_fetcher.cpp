// libdebuginfod client (see debuginfod_fetcher.h).
#include "ptscope/symbols.h"

#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <shared_mutex>
#include <type_traits>

#include "ptscope/format.h"

namespace ptscope::symbols {
namespace {

// Process-wide state (see SetUpProcess). Fetchers whose URLs equal the environment's take the
// lock shared and never write the environment; any other fetcher (library tests, callers that
// skipped SetUpProcess) sets DEBUGINFOD_URLS for its request with the lock held exclusively, so
// no library call reads the environment while it changes.
std::shared_mutex g_environment_mutex;
DebuginfodProgressFn g_progress;  // written only by SetUpProcess, before threads start

std::string JoinUrls(const std::vector<std::string>& urls) {
  std::string joined;
  for (const std::string& url : urls) {
    if (url.empty()) continue;
    if (!joined.empty()) joined += ' ';
    joined += url;
  }
  return joined;
}

// libdebuginfod, loaded on the first download (as elfutils' own libdw does): linked in, it
// brought libcurl, GnuTLS, Kerberos, LDAP and ICU into every pt-decode run, whose symbol
// relocations cost ~15 ms before main() even when no URL is configured (the common case).
// The header's prototypes type the pointers, so a changed signature fails the build.
struct DebuginfodLibrary {
  decltype(&debuginfod_begin) begin = nullptr;
  decltype(&debuginfod_end) end = nullptr;
  decltype(&debuginfod_set_user_data) set_user_data = nullptr;
  decltype(&debuginfod_get_user_data) get_user_data = nullptr;
  decltype(&debuginfod_set_progressfn) set_progressfn = nullptr;
  decltype(&debuginfod_find_debuginfo) find_debuginfo = nullptr;
  decltype(&debuginfod_find_executable) find_executable = nullptr;
  std::string error;  // why it could not be loaded; empty when it was
};

const DebuginfodLibrary& Library() {
  static const DebuginfodLibrary library = [] {
    DebuginfodLibrary loaded;
    constexpr const char* kSoname = "libdebuginfod.so.1";
    void* handle = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* reason = ::dlerror();
      loaded.error = std::string("cannot load ") + kSoname + " (" +
                     (reason != nullptr ? reason : "unknown reason") +
                     "): install Debian's libdebuginfod1 package to fetch files by build id";
      return loaded;
    }
    auto bind = [&](auto& function, const char* name) {
      using Pointer = std::remove_reference_t<decltype(function)>;
      function = reinterpret_cast<Pointer>(::dlsym(handle, name));
      if (function == nullptr && loaded.error.empty()) {
        loaded.error = std::string(kSoname) + " lacks " + name +
                       ": it is not elfutils' libdebuginfod, or too old a one";
      }
    };
    bind(loaded.begin, "debuginfod_begin");
    bind(loaded.end, "debuginfod_end");
    bind(loaded.set_user_data, "debuginfod_set_user_data");
    bind(loaded.get_user_data, "debuginfod_get_user_data");
    bind(loaded.set_progressfn, "debuginfod_set_progressfn");
    bind(loaded.find_debuginfo, "debuginfod_find_debuginfo");
    bind(loaded.find_executable, "debuginfod_find_executable");
    return loaded;  // the handle stays open for the process's life
  }();
  return library;
}

// What one library call needs inside its progress callback.
struct Request {
  std::chrono::steady_clock::time_point deadline;
  DebuginfodProgress progress;
  bool reported = false;
  std::chrono::steady_clock::time_point last_report;
};

// Called by the library during transfers: a non-zero return cancels the request.
int OnProgress(debuginfod_client* client, long bytes, long total) {
  auto* request = static_cast<Request*>(Library().get_user_data(client));
  if (request == nullptr) return 0;
  auto now = std::chrono::steady_clock::now();
  if (g_progress && (!request->reported || bytes != request->progress.bytes) &&
      (!request->reported || now - request->last_report >= std::chrono::milliseconds(100))) {
    request->progress.bytes = bytes;
    request->progress.total = total;
    g_progress(request->progress);
    request->reported = true;
    request->last_report = now;
  }
  return now > request->deadline ? 1 : 0;
}

// The library reads its server list only from the environment: set it for the duration of a
// request and put the previous value back (only under the exclusive environment lock).
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

std::string Mebibytes(long bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

}  // namespace

std::string DebuginfodProgressLine(const DebuginfodProgress& p) {
  std::string line = "\rdebuginfod: " + p.module + " " + p.artifact + ": ";
  if (p.finished && !p.found) {
    line += "not downloaded";
  } else if (p.total > 0) {
    line += Mebibytes(p.bytes) + " of " + Mebibytes(p.total) + " MiB";
  } else {
    line += Mebibytes(p.bytes) + " MiB";
  }
  if (p.finished && p.found) line += ", done";
  line += "\x1b[K";  // erase what a longer previous line left
  if (p.finished) line += "\n";
  return line;
}

void DebuginfodFetcher::SetUpProcess(const std::vector<std::string>& urls,
                                     DebuginfodProgressFn progress) {
  std::unique_lock<std::shared_mutex> lock(g_environment_mutex);
  std::string joined = JoinUrls(urls);
  if (!joined.empty()) setenv(DEBUGINFOD_URLS_ENV_VAR, joined.c_str(), 1);
  g_progress = std::move(progress);
}

DebuginfodFetcher::DebuginfodFetcher(DebuginfodOptions options)
    : urls_(JoinUrls(options.urls)),
      timeout_seconds_(options.timeout_seconds == 0 ? 30 : options.timeout_seconds) {}

DebuginfodFetcher DebuginfodFetcher::FromEnvironment(DebuginfodOptions options) {
  if (options.urls.empty()) {
    const char* env = std::getenv(DEBUGINFOD_URLS_ENV_VAR);
    if (env != nullptr && std::strspn(env, " \t") != std::strlen(env)) options.urls.push_back(env);
  }
  return DebuginfodFetcher(std::move(options));
}

Result<std::string> DebuginfodFetcher::FetchExecutable(const std::vector<uint8_t>& build_id,
                                                       const std::string& module) {
  return Fetch(build_id, false, module);
}

Result<std::string> DebuginfodFetcher::FetchDebugInfo(const std::vector<uint8_t>& build_id,
                                                      const std::string& module) {
  return Fetch(build_id, true, module);
}

Result<std::string> DebuginfodFetcher::Fetch(const std::vector<uint8_t>& build_id, bool debuginfo,
                                             const std::string& module) {
  const char* what = debuginfo ? "debuginfo" : "executable";
  if (!enabled()) {
    return Unexpected(Errc::kNotFound, "debuginfod: no server configured (set DEBUGINFOD_URLS "
                                       "or pass --debuginfod URL)");
  }
  std::string hex = format::ToHex(build_id);
  if (build_id.empty()) return Unexpected(Errc::kNotFound, "debuginfod: the module has no build id");
  std::string key = (debuginfo ? "d" : "e") + hex;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_.count(key) != 0) {
      return Unexpected(Errc::kNotFound, "debuginfod: " + std::string(what) + " of build id " +
                                             hex + " not found (asked before)");
    }
  }
  Result<std::string> result = CallLibrary(build_id, debuginfo, module);
  if (!result) {
    std::lock_guard<std::mutex> lock(mutex_);
    failed_.insert(key);
  }
  return result;
}

Result<std::string> DebuginfodFetcher::CallLibrary(const std::vector<uint8_t>& build_id,
                                                   bool debuginfo, const std::string& module) {
  const char* what = debuginfo ? "debuginfo" : "executable";
  std::string hex = format::ToHex(build_id);
  std::shared_lock<std::shared_mutex> shared(g_environment_mutex, std::defer_lock);
  std::unique_lock<std::shared_mutex> exclusive(g_environment_mutex, std::defer_lock);
  std::optional<ScopedEnv> urls;
  shared.lock();
  const char* env = std::getenv(DEBUGINFOD_URLS_ENV_VAR);
  if (env == nullptr || urls_ != env) {
    shared.unlock();
    exclusive.lock();
    urls.emplace(DEBUGINFOD_URLS_ENV_VAR, urls_);
  }
  const DebuginfodLibrary& library = Library();
  if (!library.error.empty()) {
    return Unexpected(Errc::kUnsupported, "debuginfod: " + library.error);
  }
  debuginfod_client* client = library.begin();
  if (client == nullptr) return Unexpected(Errc::kInternal, "debuginfod: cannot start a client");
  Request request;
  request.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds_);
  request.progress.module = module.empty() ? hex : std::filesystem::path(module).filename().string();
  request.progress.artifact = what;
  library.set_user_data(client, &request);
  library.set_progressfn(client, OnProgress);
  char* path = nullptr;
  ++library_calls_;
  int fd = debuginfo ? library.find_debuginfo(client, build_id.data(),
                                              static_cast<int>(build_id.size()), &path)
                     : library.find_executable(client, build_id.data(),
                                               static_cast<int>(build_id.size()), &path);
  library.end(client);
  urls.reset();
  if (request.reported && g_progress) {  // close the download's line
    request.progress.finished = true;
    request.progress.found = fd >= 0;
    g_progress(request.progress);
  }
  if (fd < 0) {
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
