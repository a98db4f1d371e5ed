// OutputFile: symbolic links are never followed, only regular files are replaced, modes are
// forced, and an archive whose header cannot be written (for real: RLIMIT_FSIZE makes write(2)
// fail with EFBIG) is removed. archive_test.cpp checks the cut after a failed chunk write.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ptscope/format.h"
#include "ptscope/output_file.h"
#include "../support/temp_dir.h"

namespace ptscope::format {
namespace {

namespace fs = std::filesystem;

using TempDir = ptscope::testing::TempDir;

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

TEST_CASE("in place: a new file gets mode 0600, an existing one is emptied and loses its mode") {
  TempDir dir{"ptscope-output"};
  const mode_t old_umask = ::umask(0);
  auto created = OutputFile::CreateInPlace(dir / "new.ptar");
  ::umask(old_umask);
  REQUIRE(created);
  REQUIRE(created->Write("abc", 3));
  REQUIRE(created->Commit());
  CHECK(Contents(dir / "new.ptar") == "abc");
  CHECK(ModeOf(dir / "new.ptar") == 0600);

  WriteText(dir / "old.ptar", "previous contents");
  ::chmod((dir / "old.ptar").c_str(), 0644);
  auto replaced = OutputFile::CreateInPlace(dir / "old.ptar");
  REQUIRE(replaced);
  REQUIRE(replaced->Write("x", 1));
  REQUIRE(replaced->Commit());
  CHECK(Contents(dir / "old.ptar") == "x");
  CHECK(ModeOf(dir / "old.ptar") == 0600);
}

TEST_CASE("a symbolic link at the path is refused; neither its target nor a dangling one changes") {
  TempDir dir{"ptscope-output"};
  WriteText(dir / "victim", "keep me");
  ::chmod((dir / "victim").c_str(), 0644);
  fs::create_symlink(dir / "victim", dir / "link.ptar");
  fs::create_symlink(dir / "not-there", dir / "dangling.ptar");
  for (auto create : {&OutputFile::CreateInPlace, &OutputFile::CreateReplacing}) {
    for (const char* name : {"link.ptar", "dangling.ptar"}) {
      auto file = create(dir / name, 0600);
      REQUIRE_FALSE(file);
      CHECK(file.error().message ==
            dir / name + ": is a symbolic link; ptscope never writes through one (remove the link "
                         "or choose another output path)");
    }
  }
  CHECK(Contents(dir / "victim") == "keep me");
  CHECK(ModeOf(dir / "victim") == 0644);
  CHECK_FALSE(fs::exists(dir / "not-there"));
  CHECK(fs::is_symlink(dir / "link.ptar"));
  CHECK(fs::is_symlink(dir / "dangling.ptar"));
}

TEST_CASE("a FIFO or a directory at the path is refused without blocking") {
  TempDir dir{"ptscope-output"};
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  fs::create_directory(dir / "sub");
  for (auto create : {&OutputFile::CreateInPlace, &OutputFile::CreateReplacing}) {
    auto fifo = create(dir / "fifo", 0600);
    REQUIRE_FALSE(fifo);
    CHECK(fifo.error().message ==
          dir / "fifo" + ": is a FIFO, not a regular file; choose a file name for the output");
    auto sub = create(dir / "sub", 0600);
    REQUIRE_FALSE(sub);
    CHECK(sub.error().message ==
          dir / "sub" + ": is a directory, not a regular file; choose a file name for the output");
  }
}

TEST_CASE("replacing: the path changes only at Commit; an uncommitted file leaves no trace") {
  TempDir dir{"ptscope-output"};
  WriteText(dir / "trace.txt", "old");
  {
    auto file = OutputFile::CreateReplacing(dir / "trace.txt", 0644);
    REQUIRE(file);
    REQUIRE(file->Write("new", 3));
    CHECK(Contents(dir / "trace.txt") == "old");
  }  // destroyed without Commit: a failed writer
  CHECK(Contents(dir / "trace.txt") == "old");
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
  auto file = OutputFile::CreateReplacing(dir / "trace.txt", 0644);
  REQUIRE(file);
  REQUIRE(file->Write("new", 3));
  REQUIRE(file->Commit());
  CHECK(Contents(dir / "trace.txt") == "new");
  CHECK(ModeOf(dir / "trace.txt") == 0644);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("replacing writes a character device in place instead of replacing it") {
  auto null = OutputFile::CreateReplacing("/dev/null", 0600);
  REQUIRE(null);
  REQUIRE(null->Write("discarded", 9));
  REQUIRE(null->Commit());
  struct stat st {};
  REQUIRE(::lstat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("Discard removes the file only while the path still names it") {
  TempDir dir{"ptscope-output"};
  auto file = OutputFile::CreateInPlace(dir / "a.ptar");
  REQUIRE(file);
  file->Discard();
  CHECK_FALSE(fs::exists(dir / "a.ptar"));
  auto moved = OutputFile::CreateInPlace(dir / "b.ptar");
  REQUIRE(moved);
  fs::rename(dir / "b.ptar", dir / "elsewhere");
  WriteText(dir / "b.ptar", "someone else's");
  moved->Discard();
  CHECK(Contents(dir / "b.ptar") == "someone else's");
}

// Runs `body` with writes past `limit` bytes failing (EFBIG; SIGXFSZ ignored), then restores.
template <typename Body>
void WithFileSizeLimit(rlim_t limit, Body body) {
  struct rlimit old {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  struct rlimit low = old;
  low.rlim_cur = limit;
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGXFSZ, &ignore, &previous);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &low) == 0);
  body();
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::sigaction(SIGXFSZ, &previous, nullptr);
}

TEST_CASE("an archive whose header cannot be written is removed") {
  TempDir dir{"ptscope-output"};
  const std::string path = dir / "empty.ptar";
  WithFileSizeLimit(16, [&] {
    auto writer = ArchiveWriter::Create(path);
    REQUIRE_FALSE(writer);
    CHECK(writer.error().message.rfind(path + ": write failed: File too large", 0) == 0);
  });
  CHECK_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace ptscope::format
