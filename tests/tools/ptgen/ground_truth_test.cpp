// The one ground-truth writer of pt-emulate and pt-synth: exact lines, what Flush() hands to the
// kernel (a killed generator keeps it), the file mode, and no writing through a symbolic link.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ground_truth.h"
#include "../../support/temp_dir.h"

namespace ptscope::ptgen {
namespace {

using TempDir = ptscope::testing::TempDir;

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("ground truth: one 'TID 0xADDRESS' line per instruction, flushed as asked, mode 0600") {
  TempDir dir{"ptscope-truth"};
  const std::string path = dir.path + "/truth.txt";
  auto writer = GroundTruthWriter::Create(path);
  REQUIRE(writer);
  (*writer)->Add(1234, 0x401000);
  (*writer)->Add(0, 0);
  (*writer)->Add(4294967295u, 0xffffffffffffffffull);
  CHECK(Contents(path).empty());  // buffered
  REQUIRE((*writer)->Flush());
  CHECK(Contents(path) == "1234 0x401000\n0 0x0\n4294967295 0xffffffffffffffff\n");
  (*writer)->Add(7, 0x7f0000001234);
  REQUIRE((*writer)->Close());
  CHECK(Contents(path) ==
        "1234 0x401000\n0 0x0\n4294967295 0xffffffffffffffff\n7 0x7f0000001234\n");
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
}

TEST_CASE("ground truth: a symbolic link at the path is refused, its target untouched") {
  TempDir dir{"ptscope-truth"};
  const std::string target = dir.path + "/target.txt";
  const std::string link = dir.path + "/truth.txt";
  { std::ofstream(target) << "keep\n"; }
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  auto writer = GroundTruthWriter::Create(link);
  REQUIRE(!writer);
  CHECK(writer.error().message.find(link) != std::string::npos);
  CHECK(Contents(target) == "keep\n");
}

}  // namespace
}  // namespace ptscope::ptgen
