// pt-archive extract FILE DIR: writes every blob (vdso, jitdump, perf maps, embedded ELF and debug
// files) into DIR with a manifest.tsv. Output names are built from a sanitized single path
// component, so nothing can be written outside DIR whatever names the archive holds.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "commands.h"
#include "ptscope/format.h"
#include "ptscope/output_file.h"

namespace ptscope::tools {
namespace {

namespace fmt = ptscope::format;

// The last path component of `name`, reduced to [A-Za-z0-9._-], without leading dots, bounded.
std::string SafeComponent(const std::string& name) {
  std::string base = name.substr(name.find_last_of('/') == std::string::npos
                                     ? 0
                                     : name.find_last_of('/') + 1);
  std::string out;
  for (char c : base) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    out.push_back(ok ? c : '_');
  }
  size_t first = out.find_first_not_of('.');
  out = first == std::string::npos ? "" : out.substr(first);
  if (out.size() > 100) out.resize(100);
  return out.empty() ? "unnamed" : out;
}

// Tabs and newlines in names would break the TSV: escape them (and the escape character).
std::string TsvField(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\t') out += "\\t";
    else if (c == '\n') out += "\\n";
    else if (c == '\\') out += "\\\\";
    else out.push_back(c);
  }
  return out;
}

// Written beside `path` and renamed over it when complete: a failed write never leaves a file
// that looks extracted, and a symbolic link at `path` is refused (output_file.h).
Status WriteNewFile(const std::string& path, const std::vector<uint8_t>& data) {
  PTSCOPE_ASSIGN_OR_RETURN(fmt::OutputFile out, fmt::OutputFile::CreateReplacing(path, 0600));
  PTSCOPE_TRY(out.Write(data.data(), data.size()));
  return out.Commit();
}

Status MakeDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0) return Ok();
  struct stat st {};
  if (errno == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Ok();
  return MakeError(Errc::kIo, dir + ": cannot create output directory: " +
                                  (errno == EEXIST ? "exists and is not a directory"
                                                   : std::strerror(errno)));
}

}  // namespace

int RunExtract(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::variables_map vm;
  if (auto exit = ParseCommandLine("extract", "FILE DIR", args,
                                   po::options_description("extract options"), {"file", "dir"},
                                   vm)) {
    return *exit;
  }
  std::string path = vm["file"].as<std::string>();
  std::string dir = vm["dir"].as<std::string>();
  // Each blob's bytes are read when it is written, one at a time.
  Result<fmt::Archive> archive =
      fmt::ReadArchive(path, fmt::ReadOptions{.keep_pt_bytes = false, .keep_blob_bytes = false});
  if (!archive) return ReportError(archive.error());
  if (Status made = MakeDir(dir); !made) return ReportError(made.error());
  std::string manifest = "kind\tname\tbuild_id\tsize\tfile\n";
  for (size_t i = 0; i < archive->blobs.size(); ++i) {
    const fmt::BlobChunk& blob = archive->blobs[i];
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "%03zu-", i);
    std::string file = prefix + std::string(fmt::BlobKindName(blob.kind)) + "-" +
                       SafeComponent(blob.name);
    Result<std::vector<uint8_t>> data = fmt::LoadBlobData(*archive, i);
    if (!data) return ReportError(data.error());
    if (Status s = WriteNewFile(dir + "/" + file, *data); !s) return ReportError(s.error());
    manifest += std::string(fmt::BlobKindName(blob.kind)) + "\t" + TsvField(blob.name) + "\t" +
                (blob.build_id.empty() ? "-" : fmt::ToHex(blob.build_id)) + "\t" +
                std::to_string(data->size()) + "\t" + file + "\n";
  }
  std::vector<uint8_t> bytes(manifest.begin(), manifest.end());
  if (Status s = WriteNewFile(dir + "/manifest.tsv", bytes); !s) return ReportError(s.error());
  std::printf("%s: extracted %zu blobs to %s (manifest.tsv)\n", path.c_str(),
              archive->blobs.size(), dir.c_str());
  return InputStatus(path, *archive, "extracted the blobs of the intact chunks");
}

}  // namespace ptscope::tools
