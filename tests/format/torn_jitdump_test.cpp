// The jit.torn.<n>.* metadata keys (FORMAT.md "Metadata keys"): written, read back through an
// archive, parsed to the same values; exact key/value text; a bad value names its key.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

#include "ptscope/format.h"
#include "ptscope/torn_jitdump.h"

namespace ptscope::format {
namespace {

TornJitdump Sample() {
  TornJitdump t;
  t.pid = 4242;
  t.jitdump = "/tmp/jit-4242.dump";
  t.bytes_kept = 191;
  t.bytes_lost = 30;
  t.record_size = 96;
  t.records_kept = 2;
  t.waited_ms = 200;
  t.perf_map = "/tmp/perf-4242.map";
  t.code_count = 7;
  t.code = {{0x7f00001000, 0x40, "JS:*hot /w/node_hot.js:3:13"}, {0x7f00002000, 0x5, "LazyCompile:~x"}};
  return t;
}

TEST_CASE("torn jitdump metadata: exact keys, and the same values back from an archive") {
  TornJitdump first = Sample();
  TornJitdump second;  // header torn, no perf map, no code listed
  second.pid = 7;
  second.jitdump = "/j/jit-7.dump";
  second.bytes_lost = 12;
  second.waited_ms = 200;
  auto entries = TornJitdumpMetadata(first, 1);
  std::vector<std::pair<std::string, std::string>> want = {
      {"jit.torn.1.pid", "4242"},
      {"jit.torn.1.jitdump", "/tmp/jit-4242.dump"},
      {"jit.torn.1.bytes_kept", "191"},
      {"jit.torn.1.bytes_lost", "30"},
      {"jit.torn.1.record_size", "96"},
      {"jit.torn.1.records_kept", "2"},
      {"jit.torn.1.waited_ms", "200"},
      {"jit.torn.1.perf_map", "/tmp/perf-4242.map"},
      {"jit.torn.1.code_count", "7"},
      {"jit.torn.1.code.1", "7f00001000 40 JS:*hot /w/node_hot.js:3:13"},
      {"jit.torn.1.code.2", "7f00002000 5 LazyCompile:~x"}};
  CHECK(entries == want);
  for (auto& kv : TornJitdumpMetadata(second, 2)) entries.push_back(kv);
  entries.emplace_back("jit.torn.1.from_a_newer_writer", "ignored");

  char dir_template[] = "/tmp/ptscope-torn-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string path = std::string(dir_template) + "/t.ptar";
  auto writer = ArchiveWriter::Create(path);
  REQUIRE(writer);
  REQUIRE((*writer)->Write(MetadataChunk{{{"tool", "pt-emulate"}}}));
  REQUIRE((*writer)->Write(MetadataChunk{entries}));
  REQUIRE((*writer)->Close());
  auto archive = ReadArchive(path);
  REQUIRE(archive);
  auto parsed = ParseTornJitdumps(archive->metadata, path);
  REQUIRE(parsed);
  REQUIRE(parsed->size() == 2);
  CHECK((*parsed)[0] == first);
  CHECK((*parsed)[1] == second);
  std::remove(path.c_str());
  rmdir(dir_template);
}

TEST_CASE("torn jitdump metadata: none is an empty list; a bad value names the key") {
  auto none = ParseTornJitdumps({{"tool", "pt-record"}}, "a.ptar");
  REQUIRE(none);
  CHECK(none->empty());
  auto bad = ParseTornJitdumps({{"jit.torn.1.bytes_kept", "12x"}}, "a.ptar");
  REQUIRE(!bad);
  CHECK(bad.error().message ==
        "a.ptar: metadata jit.torn.1.bytes_kept = '12x' is not what FORMAT.md describes "
        "(jit.torn.*)");
  auto bad_code = ParseTornJitdumps({{"jit.torn.1.code.1", "zz 5 f"}}, "a.ptar");
  REQUIRE(!bad_code);
  auto bad_index = ParseTornJitdumps({{"jit.torn.x.pid", "1"}}, "a.ptar");
  REQUIRE(!bad_index);
}

}  // namespace
}  // namespace ptscope::format
