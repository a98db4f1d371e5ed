// AddressSpace: mappings over time, exec, fork, overlap splitting.
#include <doctest/doctest.h>

#include "ptscope/symbols.h"

namespace ptscope::symbols {
namespace {

// Module index found at (pid, address, time), or -1.
int ModuleAt(const AddressSpace& space, uint32_t pid, uint64_t address, uint64_t time) {
  const Mapping* mapping = space.Lookup(pid, address, time);
  return mapping == nullptr ? -1 : static_cast<int>(mapping->module);
}

TEST_CASE("a mapping holds its range from the time it was added") {
  AddressSpace space;
  uint32_t exe = space.InternModule("/bin/app", {1, 2});
  uint32_t lib = space.InternModule("/lib/libx.so", {3});
  CHECK(space.InternModule("/bin/app", {1, 2}) == exe);
  space.Map(10, 100, 0x400000, 0x1000, 0x0, exe);
  space.Map(10, 500, 0x7f0000, 0x2000, 0x1000, lib);  // dlopen at t=500
  CHECK(ModuleAt(space, 10, 0x400000, 100) == 0);
  CHECK(ModuleAt(space, 10, 0x400fff, 1000) == 0);
  CHECK(ModuleAt(space, 10, 0x401000, 1000) == -1);
  CHECK(ModuleAt(space, 10, 0x7f0010, 499) == -1);  // not loaded yet
  CHECK(ModuleAt(space, 10, 0x7f0010, 500) == 1);
  CHECK(space.Lookup(10, 0x7f0010, 600)->pgoff == 0x1000);
  CHECK(ModuleAt(space, 11, 0x400000, 100) == -1);  // another process
}

TEST_CASE("exec clears the old image; the new mappings start after it") {
  AddressSpace space;
  uint32_t shell = space.InternModule("/bin/sh", {});
  uint32_t app = space.InternModule("/bin/app", {});
  space.Map(10, 100, 0x400000, 0x1000, 0, shell);
  space.Exec(10, 200);
  space.Map(10, 200, 0x500000, 0x1000, 0, app);
  CHECK(ModuleAt(space, 10, 0x400000, 150) == static_cast<int>(shell));
  CHECK(ModuleAt(space, 10, 0x400000, 200) == -1);
  CHECK(ModuleAt(space, 10, 0x500000, 200) == static_cast<int>(app));
  CHECK(ModuleAt(space, 10, 0x500000, 199) == -1);
}

TEST_CASE("fork copies the mappings live at that time; later changes stay per process") {
  AddressSpace space;
  uint32_t app = space.InternModule("/bin/app", {});
  uint32_t lib = space.InternModule("/lib/liby.so", {});
  space.Map(10, 100, 0x400000, 0x1000, 0, app);
  space.Fork(10, 20, 300);
  space.Map(10, 400, 0x7f0000, 0x1000, 0, lib);  // only the parent loads liby
  CHECK(ModuleAt(space, 20, 0x400000, 300) == static_cast<int>(app));
  CHECK(ModuleAt(space, 20, 0x400000, 299) == -1);  // the child did not exist before the fork
  CHECK(ModuleAt(space, 20, 0x7f0000, 500) == -1);
  CHECK(ModuleAt(space, 10, 0x7f0000, 500) == static_cast<int>(lib));
  space.Fork(10, 10, 600);  // a thread: same address space, nothing copied
  CHECK(space.MappingsOf(10).size() == 2);
}

TEST_CASE("a new mapping over part of an old one splits it at that time") {
  AddressSpace space;
  uint32_t a = space.InternModule("/a", {});
  uint32_t b = space.InternModule("/b", {});
  space.Map(1, 10, 0x1000, 0x3000, 0x0, a);   // [0x1000, 0x4000)
  space.Map(1, 20, 0x2000, 0x1000, 0x0, b);   // [0x2000, 0x3000) replaces the middle
  CHECK(ModuleAt(space, 1, 0x2000, 15) == static_cast<int>(a));
  CHECK(ModuleAt(space, 1, 0x2000, 20) == static_cast<int>(b));
  CHECK(ModuleAt(space, 1, 0x1000, 25) == static_cast<int>(a));
  const Mapping* right = space.Lookup(1, 0x3800, 25);
  REQUIRE(right != nullptr);
  CHECK(right->module == a);
  CHECK(right->pgoff == 0x2000);  // offsets of the surviving right part are kept
}

}  // namespace
}  // namespace ptscope::symbols
