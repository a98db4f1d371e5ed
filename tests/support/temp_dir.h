// A fresh directory for one test's files, removed with everything in it when the test's TempDir
// goes, so that the tests leave nothing in /tmp (several used to leave a directory a run). The
// tests of format, decode, record and ptgen share it; the symbols tests keep theirs, whose path is
// a std::filesystem::path.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace ptscope::testing {

class TempDir {
 public:
  // /tmp/PREFIX-XXXXXX (not under TMPDIR: some tests point TMPDIR elsewhere meanwhile).
  explicit TempDir(const std::string& prefix) {
    std::string templ = "/tmp/" + prefix + "-XXXXXX";
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    path = templ;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string operator/(const std::string& name) const { return path + "/" + name; }

  std::string path;
};

}  // namespace ptscope::testing
