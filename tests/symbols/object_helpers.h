// Helpers the symbols/ tests share: the environment meson sets, an opened object file, its .text
// range, and a temporary directory removed with everything in it.
#pragma once

#include <doctest/doctest.h>

#include <llvm/Object/ObjectFile.h>

#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

namespace ptscope::symbols::testing {

inline std::string Env(const char* name) {
  const char* value = std::getenv(name);
  REQUIRE_MESSAGE(value != nullptr, name << " is not set (meson sets it)");
  return value;
}

inline llvm::object::OwningBinary<llvm::object::ObjectFile> Open(const std::string& path) {
  auto binary = llvm::object::ObjectFile::createObjectFile(path);
  REQUIRE_MESSAGE(static_cast<bool>(binary), path);
  return std::move(*binary);
}

// The [start, end) of .text.
inline std::pair<uint64_t, uint64_t> TextRange(const llvm::object::ObjectFile& object) {
  for (const llvm::object::SectionRef& section : object.sections()) {
    auto name = section.getName();
    if (name && *name == ".text") {
      return {section.getAddress(), section.getAddress() + section.getSize()};
    }
    if (!name) llvm::consumeError(name.takeError());
  }
  FAIL("no .text in " << object.getFileName().str());
  return {};
}

// A fresh directory under the system's temporary directory, named `<prefix>.XXXXXX`.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace ptscope::symbols::testing
