// CaptureJitFiles on jitdumps a runtime has not finished writing (issue #27): V8 with --perf-prof
// leaves its last record torn when a capture ends, or completes it a moment later.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "module_collector.h"

namespace ptscope::record {
namespace {

void Put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void Put64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// perf's jitdump header (40 bytes): magic "JiTD", version 1, total_size, EM_X86_64, pad, pid,
// timestamp, flags.
std::vector<uint8_t> Header(uint32_t pid) {
  std::vector<uint8_t> out;
  Put32(out, 0x4A695444);
  Put32(out, 1);
  Put32(out, 40);
  Put32(out, 62);
  Put32(out, 0);
  Put32(out, pid);
  Put64(out, 1000);
  Put64(out, 0);
  return out;
}

// A JIT_CODE_LOAD record: 16-byte prefix, pid, tid, vma, code_addr, code_size, code_index, the
// NUL-terminated name, then the code.
std::vector<uint8_t> Load(uint32_t pid, uint64_t addr, const std::string& name,
                          const std::vector<uint8_t>& code, uint64_t index) {
  std::vector<uint8_t> body;
  Put32(body, pid);
  Put32(body, pid);
  Put64(body, addr);
  Put64(body, addr);
  Put64(body, code.size());
  Put64(body, index);
  body.insert(body.end(), name.begin(), name.end());
  body.push_back(0);
  body.insert(body.end(), code.begin(), code.end());
  std::vector<uint8_t> out;
  Put32(out, 0);
  Put32(out, static_cast<uint32_t>(16 + body.size()));
  Put64(out, 2000 + index);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

std::vector<uint8_t> Cat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

void Write(const std::string& path, const std::vector<uint8_t>& bytes, bool append = false) {
  std::ofstream out(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

struct Files {
  uint32_t pid = static_cast<uint32_t>(getpid());
  std::string dir = std::filesystem::temp_directory_path() /
                    ("ptscope_jit_capture_" + std::to_string(getpid()));
  std::string dump = dir + "/jit-" + std::to_string(pid) + ".dump";
  std::string map = "/tmp/perf-" + std::to_string(pid) + ".map";
  Files() { std::filesystem::create_directories(dir); }
  ~Files() {
    std::filesystem::remove_all(dir);
    std::remove(map.c_str());
  }
};

long long Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

TEST_CASE("a jitdump torn inside its last record keeps the whole records; the perf map names the "
          "code left without bytes") {
  Files f;
  const auto warm = Load(f.pid, 0x7f0000001000, "JS:*warm hot.js:1", {0x90, 0xc3}, 1);
  const auto loop = Load(f.pid, 0x7f0000001800, "JS:~loop hot.js:9", {0xc3}, 2);
  const auto hot = Load(f.pid, 0x7f0000002000, "JS:*hot hot.js:5", std::vector<uint8_t>(64, 0x90), 3);
  REQUIRE(warm.size() == 76);
  REQUIRE(loop.size() == 75);
  REQUIRE(hot.size() == 137);
  const auto whole = Cat({Header(f.pid), warm, loop});
  auto file = whole;
  file.insert(file.end(), hot.begin(), hot.begin() + 30);  // the writer stopped 30 bytes in
  Write(f.dump, file);
  // The map is written in the same order; V8's also lists bytecode, which its jitdump never has:
  // only what follows the newest whole record is without bytes because of the tear.
  std::ofstream(f.map) << "7f0000000800 10 JS:~bytecode hot.js:1\n"
                       << "7f0000001000 2 JS:*warm hot.js:1\n"
                       << "7f0000001800 1 JS:~loop hot.js:9\n"
                       << "7f0000002000 40 JS:*hot hot.js:5\n";
  std::vector<std::string> warnings;
  std::vector<format::TornJitdump> torn;
  const auto start = std::chrono::steady_clock::now();
  auto blobs = CaptureJitFiles({{f.pid, {f.dump}}}, {f.pid}, &warnings,
                               JitTailWait{std::chrono::milliseconds(10),
                                           std::chrono::milliseconds(50)},
                               &torn);
  CHECK(Ms(std::chrono::steady_clock::now() - start) >= 50);  // it waited for the writer
  REQUIRE(blobs.size() == 2);
  CHECK(blobs[0].kind == format::BlobKind::kJitdump);
  CHECK(blobs[0].name == f.dump);
  CHECK(blobs[0].pid == f.pid);
  CHECK(blobs[0].data == whole);  // exactly the header and the two whole records
  CHECK(blobs[1].kind == format::BlobKind::kPerfMap);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == f.dump + ": the last record (offset 191: 30 of 137 bytes) was still being "
                                "written when the capture ended and 50 ms later; kept its 2 whole "
                                "records (191 bytes). Code logged from there on has no bytes, so "
                                "running it decodes as a missing-code gap; " + f.map +
                                " names 1 function the jitdump lacks (JS:*hot hot.js:5 at "
                                "0x7f0000002000)");
  // The same facts for the archive's metadata (jit.torn.1.*).
  format::TornJitdump want;
  want.pid = f.pid;
  want.jitdump = f.dump;
  want.bytes_kept = 191;
  want.bytes_lost = 30;
  want.record_size = 137;
  want.records_kept = 2;
  want.waited_ms = 50;
  want.perf_map = f.map;
  want.code_count = 1;
  want.code = {{0x7f0000002000, 0x40, "JS:*hot hot.js:5"}};
  REQUIRE(torn.size() == 1);
  CHECK(torn[0] == want);
}

TEST_CASE("a jitdump record finished by its writer during the wait is captured whole, silently") {
  Files f;
  const auto hot = Load(f.pid, 0x7f0000002000, "JS:*hot hot.js:5", std::vector<uint8_t>(64, 0x90), 3);
  const auto whole = Cat({Header(f.pid), hot});
  Write(f.dump, std::vector<uint8_t>(whole.begin(), whole.begin() + 40 + 5));  // 5 prefix bytes
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    Write(f.dump, std::vector<uint8_t>(whole.begin() + 45, whole.end()), true);
  });
  std::vector<std::string> warnings;
  const auto start = std::chrono::steady_clock::now();
  auto blobs = CaptureJitFiles({{f.pid, {f.dump}}}, {}, &warnings,
                               JitTailWait{std::chrono::milliseconds(10),
                                           std::chrono::milliseconds(5000)});
  const long long waited = Ms(std::chrono::steady_clock::now() - start);
  writer.join();
  CHECK(waited >= 40);
  CHECK(waited < 5000);  // done when the record was whole, not at the limit
  REQUIRE(blobs.size() == 1);
  CHECK(blobs[0].data == whole);
  CHECK(warnings.empty());
}

TEST_CASE("a jitdump cut in a record's size field or in its header, with no perf map") {
  Files f;
  SUBCASE("5 bytes of the next record: its size is not yet written") {
    const auto hot = Load(f.pid, 0x7f0000002000, "JS:*hot", {0xc3}, 3);
    auto file = Cat({Header(f.pid), hot});
    file.insert(file.end(), {0, 0, 0, 0, 0x40});
    Write(f.dump, file);
    std::vector<std::string> warnings;
    std::vector<format::TornJitdump> torn;
    auto blobs = CaptureJitFiles({{f.pid, {f.dump}}}, {f.pid}, &warnings,
                                 JitTailWait{std::chrono::milliseconds(10),
                                             std::chrono::milliseconds(20)},
                                 &torn);
    REQUIRE(torn.size() == 1);  // no perf map: none named, none listed
    CHECK(torn[0].bytes_kept == 105);
    CHECK(torn[0].bytes_lost == 5);
    CHECK(torn[0].record_size == 0);
    CHECK(torn[0].perf_map.empty());
    CHECK(torn[0].code_count == 0);
    CHECK(torn[0].code.empty());
    REQUIRE(blobs.size() == 1);
    CHECK(blobs[0].data == Cat({Header(f.pid), hot}));
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] == f.dump + ": the last record (offset 105: 5 of its bytes, its size not yet "
                                  "written) was still being written when the capture ended and 20 "
                                  "ms later; kept its 1 whole record (105 bytes). Code logged from "
                                  "there on has no bytes, so running it decodes as a missing-code "
                                  "gap; the runtime wrote no " + f.map +
                                  " to name it (node: --perf-basic-prof)");
  }
  SUBCASE("an empty file (V8 before its first buffer flush)") {
    Write(f.dump, {});
    std::vector<std::string> warnings;
    auto blobs = CaptureJitFiles({{f.pid, {f.dump}}}, {f.pid}, &warnings,
                                 JitTailWait{std::chrono::milliseconds(10),
                                             std::chrono::milliseconds(20)});
    CHECK(blobs.empty());
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] == f.dump + ": the header (0 bytes) was still being written when the capture "
                                  "ended and 20 ms later; not captured. Code logged from there on "
                                  "has no bytes, so running it decodes as a missing-code gap; the "
                                  "runtime wrote no " + f.map + " to name it (node: "
                                  "--perf-basic-prof)");
  }
}

TEST_CASE("a whole jitdump is captured byte for byte without waiting") {
  Files f;
  const auto file = Cat({Header(f.pid), Load(f.pid, 0x7f0000001000, "JS:*warm", {0xc3}, 1)});
  Write(f.dump, file);
  std::vector<std::string> warnings;
  const auto start = std::chrono::steady_clock::now();
  auto blobs = CaptureJitFiles({{f.pid, {f.dump}}}, {}, &warnings,
                               JitTailWait{std::chrono::milliseconds(10),
                                           std::chrono::milliseconds(5000)});
  CHECK(Ms(std::chrono::steady_clock::now() - start) < 1000);
  REQUIRE(blobs.size() == 1);
  CHECK(blobs[0].data == file);
  CHECK(warnings.empty());
}

}  // namespace
}  // namespace ptscope::record
