// Helpers the symbols/ tests share for reading the test programs: the environment meson sets,
// an opened object file, and its .text range.
#pragma once

#include <doctest/doctest.h>

#include <llvm/Object/ObjectFile.h>

#include <cstdint>
#include <cstdlib>
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

}  // namespace ptscope::symbols::testing
