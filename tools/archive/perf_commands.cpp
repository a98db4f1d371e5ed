// pt-archive import-perf / export-perf (issue #6): convert between Linux perf's perf.data and
// .ptar. The conversion itself, and the writing of the imported archive, live in the format
// library (ptscope/perf_data.h); this file does the command line and the optional embedding of
// binaries.
//
//   pt-archive import-perf perf.data -o OUT.ptar [--embed-binaries]
//   pt-archive export-perf IN.ptar -o perf.data          (perf.data is created with mode 0600)
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "commands.h"
#include "ptscope/format.h"
#include "ptscope/perf_data.h"

namespace ptscope::tools {
namespace {

namespace fmt = ptscope::format;

uint64_t Le(const std::vector<uint8_t>& b, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{b[at + i]} << (8 * i);
  return v;
}

// The NT_GNU_BUILD_ID note of an ELF64 little-endian file (from its PT_NOTE segments), or empty.
std::vector<uint8_t> ElfBuildId(const std::vector<uint8_t>& elf) {
  if (elf.size() < 64 || elf[0] != 0x7f || elf[1] != 'E' || elf[2] != 'L' || elf[3] != 'F' ||
      elf[4] != 2 || elf[5] != 1) {
    return {};
  }
  uint64_t phoff = Le(elf, 0x20, 8), phentsize = Le(elf, 0x36, 2), phnum = Le(elf, 0x38, 2);
  for (uint64_t i = 0; i < phnum; ++i) {
    uint64_t ph = phoff + i * phentsize;
    if (ph + 56 > elf.size() || Le(elf, ph, 4) != 4) continue;  // PT_NOTE
    uint64_t at = Le(elf, ph + 8, 8), end = at + Le(elf, ph + 32, 8);
    if (end > elf.size() || end < at) continue;
    while (at + 12 <= end) {
      uint64_t namesz = Le(elf, at, 4), descsz = Le(elf, at + 4, 4), type = Le(elf, at + 8, 4);
      uint64_t name_at = at + 12, desc_at = name_at + (namesz + 3) / 4 * 4;
      uint64_t next = desc_at + (descsz + 3) / 4 * 4;
      if (next > end) break;
      if (type == 3 && namesz == 4 && elf[name_at] == 'G' && elf[name_at + 1] == 'N' &&
          elf[name_at + 2] == 'U') {
        return std::vector<uint8_t>(elf.begin() + desc_at, elf.begin() + desc_at + descsz);
      }
      at = next;
    }
  }
  return {};
}

// Copies each module's local file into the archive when its build id matches (or the capture
// did not know one). Mismatches and missing files are reported and skipped: the archive stays
// usable, it just does not carry that binary.
void EmbedBinaries(fmt::Archive& archive) {
  for (fmt::ModuleChunk& module : archive.modules) {
    std::ifstream in(module.path, std::ios::binary);
    struct stat st {};
    if (!in || ::stat(module.path.c_str(), &st) != 0) {
      std::fprintf(stderr, "pt-archive: warning: %s: cannot read, not embedded\n", module.path.c_str());
      continue;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<uint8_t> local_id = ElfBuildId(bytes);
    if (!module.build_id.empty() && local_id != module.build_id) {
      std::fprintf(stderr,
                   "pt-archive: warning: %s: build id %s on disk differs from %s in the capture, "
                   "not embedded\n",
                   module.path.c_str(), fmt::ToHex(local_id).c_str(), fmt::ToHex(module.build_id).c_str());
      continue;
    }
    if (module.build_id.empty()) module.build_id = local_id;
    module.size = bytes.size();
    module.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
    module.embedded = true;
    fmt::BlobChunk blob;
    blob.kind = fmt::BlobKind::kElf;
    blob.name = module.path;
    blob.build_id = module.build_id;
    blob.data = std::move(bytes);
    archive.blobs.push_back(std::move(blob));
  }
}

}  // namespace

int RunImportPerf(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description options("import-perf options");
  options.add_options()("output,o", po::value<std::string>()->required(), "the .ptar to write")(
      "embed-binaries", "copy each mapped binary whose build id matches into the archive");
  po::variables_map vm;
  if (auto status = ParseCommandLine("import-perf", "perf.data -o OUT.ptar [--embed-binaries]", args,
                                     options, {"input"}, vm)) {
    return *status;
  }
  const std::string input = vm["input"].as<std::string>();
  const std::string output = vm["output"].as<std::string>();
  auto archive = fmt::ImportPerfData(input, fmt::ReadOptions{.keep_pt_bytes = false});
  if (!archive) return ReportError(archive.error());
  uint64_t features = archive->header.features;
  if (vm.count("embed-binaries")) {
    EmbedBinaries(*archive);
    features |= fmt::kFeatureEmbeddedBinaries;
  }
  // The trace bytes, left in the perf.data, are read one piece at a time as they are written.
  // Replaced only when complete: a failed import leaves no archive that looks like one.
  const fmt::WriterOptions writer_options{.features = features, .replace_when_closed = true};
  if (auto st = fmt::WriteImportedArchive(*archive, output, writer_options); !st) {
    return ReportError(st.error());
  }
  std::fprintf(stderr, "pt-archive: %s: %zu PT pieces, %zu sideband chunks, %zu modules -> %s\n",
               input.c_str(), archive->pt_data.size(), archive->sideband.size(),
               archive->modules.size(), output.c_str());
  return InputStatus(input, *archive, "imported what came before");
}

int RunExportPerf(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description options("export-perf options");
  options.add_options()("output,o", po::value<std::string>()->required(),
                        "the perf.data to write (mode 0600)");
  po::variables_map vm;
  if (auto status = ParseCommandLine("export-perf", "IN.ptar -o perf.data", args, options,
                                     {"input"}, vm)) {
    return *status;
  }
  const std::string input = vm["input"].as<std::string>();
  // The PT bytes stay in the archive until the export writes them, one piece at a time.
  auto archive =
      fmt::ReadArchive(input, fmt::ReadOptions{.keep_pt_bytes = false, .keep_blob_bytes = false});
  if (!archive) return ReportError(archive.error());
  if (auto st = fmt::ExportPerfData(*archive, vm["output"].as<std::string>()); !st) {
    return ReportError(st.error());
  }
  return InputStatus(input, *archive,
                     "exported the " + std::to_string(archive->chunks_read) + " intact chunks");
}

}  // namespace ptscope::tools
