// Errors as values. Every library function that can fail on its environment or its input returns a
// Result<T>; only main() turns an Error into a message and an exit status. Programmer bugs use
// PTSCOPE_CHECK (abort). Trace-data damage (overflow, lost AUX, unmapped IP) is NOT an Error: it is
// an in-band gap event plus a counter.
//
// The member names follow std::expected so that C++23 can replace this type mechanically.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace ptscope {

enum class Errc {
  kIo,                  // read/write/open failed (errno text in the message)
  kNotFound,            // file, process, symbol or section does not exist
  kPermission,          // the OS refused (ptrace scope, perf_event_paranoid, file mode)
  kBadMagic,            // the input is not the format we expected
  kUnsupportedVersion,  // a newer format major version, or an unsupported variant
  kTruncated,           // input ended inside a structure
  kChecksum,            // stored checksum does not match the bytes
  kCorrupt,             // a field holds an impossible value
  kInvalidArgument,     // bad option or parameter from the caller
  kUnsupported,         // the host or input lacks a feature we need (e.g. no Intel PT)
  kInternal,            // a library we call failed in a way we cannot classify
};

const char* ErrcName(Errc code);
// The code for a failed system call's errno: ENOENT -> kNotFound, EACCES/EPERM/EROFS ->
// kPermission, anything else kIo.
Errc ErrcFromErrno(int err);

// An error carries a category and a human sentence that already names the file, offset or field
// and, where possible, what the user can do.
struct Error {
  Errc code;
  std::string message;
};

inline Error MakeError(Errc code, std::string message) { return Error{code, std::move(message)}; }

// Wrapper so that Result<T>{Unexpected(err)} reads like std::unexpected.
struct Unexpected {
  Error error;
  explicit Unexpected(Error e) : error(std::move(e)) {}
  Unexpected(Errc code, std::string message) : error{code, std::move(message)} {}
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : storage_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Unexpected u) : storage_(std::in_place_index<1>, std::move(u.error)) {}  // NOLINT
  Result(Error e) : storage_(std::in_place_index<1>, std::move(e)) {}  // NOLINT

  bool has_value() const { return storage_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { Check(); return std::get<0>(storage_); }
  const T& value() const& { Check(); return std::get<0>(storage_); }
  T&& value() && { Check(); return std::get<0>(std::move(storage_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { return std::get<1>(storage_); }
  Error&& error() && { return std::get<1>(std::move(storage_)); }

 private:
  void Check() const {
    if (!has_value()) {
      std::fprintf(stderr, "ptscope: Result::value() on error: %s\n", error().message.c_str());
      std::abort();
    }
  }
  std::variant<T, Error> storage_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Unexpected u) : error_(std::move(u.error)), ok_(false) {}  // NOLINT
  Result(Error e) : error_(std::move(e)), ok_(false) {}  // NOLINT

  bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  void value() const {
    if (!ok_) {
      std::fprintf(stderr, "ptscope: Result::value() on error: %s\n", error_.message.c_str());
      std::abort();
    }
  }
  const Error& error() const& { return error_; }
  Error&& error() && { return std::move(error_); }

 private:
  Error error_{Errc::kInternal, {}};
  bool ok_ = true;
};

using Status = Result<void>;
inline Status Ok() { return {}; }

}  // namespace ptscope

#define PTSCOPE_CONCAT_INNER(a, b) a##b
#define PTSCOPE_CONCAT(a, b) PTSCOPE_CONCAT_INNER(a, b)

// Returns the error of a Result-valued expression from the enclosing function.
#define PTSCOPE_TRY(expr)                                      \
  do {                                                         \
    auto&& ptscope_try_result = (expr);                        \
    if (!ptscope_try_result) return std::move(ptscope_try_result).error(); \
  } while (0)

// PTSCOPE_ASSIGN_OR_RETURN(auto x, Foo()); declares x from the value or returns the error.
#define PTSCOPE_ASSIGN_OR_RETURN(lhs, expr)                                        \
  auto PTSCOPE_CONCAT(ptscope_aor_, __LINE__) = (expr);                            \
  if (!PTSCOPE_CONCAT(ptscope_aor_, __LINE__))                                     \
    return std::move(PTSCOPE_CONCAT(ptscope_aor_, __LINE__)).error();              \
  lhs = std::move(PTSCOPE_CONCAT(ptscope_aor_, __LINE__)).value()

// Programmer errors only: never for bad input.
#define PTSCOPE_CHECK(cond)                                                            \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)
