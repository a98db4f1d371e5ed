// pt-archive embed IN.ptar --symbols DIR [--symbols DIR2 ...] [--debug-info] [-o OUT.ptar]
//
// Copies the binaries the archive's sideband maps (every module with a build id, from MMAP2
// records and Module chunks) into the archive as kElf blobs, found by build id through
// symbols::ModuleResolver in pt-decode's order: the recorded path (when its build id matches),
// then the --symbols directories (DIR/.build-id/xx/rest, then any ELF file below DIR whose own
// build id matches). --debug-info also embeds separate debug files (kDebugInfo, including
// /usr/lib/debug). A file with the module's name but another build id is refused, naming both
// ids. Every other
// chunk stays byte-identical (archive_splice.h); the result replaces OUT (default: IN)
// atomically, mode 0600. Nothing missing means nothing is rewritten.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <variant>

#include "archive_splice.h"
#include "commands.h"
#include "ptscope/format.h"
#include "ptscope/perf_records.h"
#include "ptscope/symbols.h"

namespace ptscope::tools {
namespace {

namespace fmt = ptscope::format;
namespace fs = std::filesystem;

struct NeededModule {
  std::string path;                      // as the capture host saw it
  std::vector<uint8_t> build_id;
  std::optional<size_t> module_chunk;    // index in SplicedArchive::chunks
};

// Modules with a build id, in order of first appearance (Module chunks, then MMAP2 records).
std::vector<NeededModule> CollectModules(const SplicedArchive& a, std::vector<std::string>& notes) {
  std::vector<NeededModule> modules;
  std::map<std::string, size_t> by_hex;
  auto add = [&](const std::string& path, const std::vector<uint8_t>& id, std::optional<size_t> at) {
    if (id.empty()) return;
    auto [it, inserted] = by_hex.emplace(fmt::ToHex(id), modules.size());
    if (inserted) modules.push_back(NeededModule{path, id, at});
    if (at && !modules[it->second].module_chunk) modules[it->second].module_chunk = at;
  };
  std::map<uint32_t, perf::RecordLayout> layouts;
  for (size_t i = 0; i < a.chunks.size(); ++i) {
    if (const auto* m = std::get_if<fmt::ModuleChunk>(&a.chunks[i])) add(m->path, m->build_id, i);
    if (const auto* attr = std::get_if<fmt::SidebandAttrChunk>(&a.chunks[i])) {
      layouts[attr->attr_id] = perf::RecordLayout{attr->sample_type, attr->sample_id_all};
    }
  }
  for (const fmt::Chunk& chunk : a.chunks) {
    const auto* sideband = std::get_if<fmt::SidebandChunk>(&chunk);
    if (sideband == nullptr) continue;
    auto layout = layouts.find(sideband->attr_id);
    if (layout == layouts.end()) continue;
    perf::RecordIterator it(sideband->records, layout->second);
    while (std::optional<Result<perf::Record>> record = it.Next()) {
      if (!*record) {
        notes.push_back(a.path + ": sideband: " + record->error().message);
        break;
      }
      const auto* mmap = std::get_if<perf::MmapRecord>(&(*record)->body);
      if (mmap != nullptr && ((*record)->misc & perf::kMiscMmapBuildId) != 0) {
        add(mmap->filename, mmap->build_id, std::nullopt);
      }
    }
  }
  return modules;
}

std::string RealPath(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  return ec ? path : real.string();
}

Result<std::vector<uint8_t>> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(Errc::kIo, path + ": cannot open to embed it");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return MakeError(Errc::kIo, path + ": read failed");
  return bytes;
}

struct EmbedPlan {
  SpliceEdits edits;
  std::vector<std::string> lines;  // the report, one line per module and file
  size_t embedded = 0, present = 0, not_found = 0, debug_embedded = 0;
};

fmt::BlobChunk MakeBlob(fmt::BlobKind kind, const NeededModule& m, std::vector<uint8_t> data) {
  fmt::BlobChunk blob;
  blob.kind = kind;
  blob.name = m.path;
  blob.build_id = m.build_id;
  blob.data = std::move(data);
  return blob;
}

Result<EmbedPlan> Plan(const SplicedArchive& a, const std::vector<std::string>& dirs,
                       bool debug_info) {
  EmbedPlan plan;
  std::vector<NeededModule> modules = CollectModules(a, plan.lines);
  std::set<std::string> have_code, have_debug;
  symbols::ModuleResolver resolver(dirs);
  for (const fmt::Chunk& chunk : a.chunks) {
    const auto* blob = std::get_if<fmt::BlobChunk>(&chunk);
    if (blob == nullptr || blob->build_id.empty()) continue;
    if (blob->kind == fmt::BlobKind::kElf) {
      have_code.insert(fmt::ToHex(blob->build_id));
      // Lets --debug-info look for the debug file of a binary embedded earlier.
      if (debug_info) PTSCOPE_TRY(resolver.AddBlob(*blob));
    }
    if (blob->kind == fmt::BlobKind::kDebugInfo) have_debug.insert(fmt::ToHex(blob->build_id));
  }
  for (const NeededModule& m : modules) {
    std::string hex = fmt::ToHex(m.build_id);
    std::string what = m.path + " " + hex;
    bool code_present = have_code.count(hex) > 0;
    if (code_present && (!debug_info || have_debug.count(hex) > 0)) {
      plan.lines.push_back("present    " + what);
      ++plan.present;
      continue;
    }
    bool debug_embedded_as_code = false;
    // As pt-decode finds it: an embedded copy, the recorded path, the --symbols directories.
    const symbols::ModuleFiles& files = resolver.Resolve(m.path, m.build_id);
    if (code_present) {
      plan.lines.push_back("present    " + what);
      ++plan.present;
    } else if (files.code_path.empty()) {
      plan.lines.push_back("not found  " + what);
      ++plan.not_found;
      continue;
    } else {
      // An unstripped copy of the same build found for its symbols holds the same code and its
      // names: embed it instead of the stripped file.
      std::string code_file = files.code_path, origin = files.code_origin;

      if (!files.debug_path.empty() && RealPath(files.debug_path) != RealPath(code_file)) {
        Result<symbols::ElfInfo> debug = symbols::ReadElfInfo(files.debug_path);
        if (debug && debug->build_id == m.build_id && !debug->code_is_nobits &&
            (debug->has_symtab || debug->has_debug_info)) {
          code_file = RealPath(files.debug_path);
          origin = files.debug_origin + ", unstripped";
          debug_embedded_as_code = true;
        }
      }
      PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> data, ReadBytes(code_file));
      plan.lines.push_back("embedded   " + what + " from " + code_file + " (" +
                           std::to_string(data.size()) + " bytes, " + origin + ")");
      plan.edits.append.push_back(MakeBlob(fmt::BlobKind::kElf, m, std::move(data)));
      ++plan.embedded;
      if (m.module_chunk) {
        fmt::ModuleChunk updated = std::get<fmt::ModuleChunk>(a.chunks[*m.module_chunk]);
        if (!updated.embedded) {
          updated.embedded = true;
          plan.edits.replace[*m.module_chunk] = std::move(updated);
        }
      } else {
        fmt::ModuleChunk added;  // known from MMAP2 only: size and mtime are the copy's
        added.path = m.path;
        added.build_id = m.build_id;
        added.size = std::get<fmt::BlobChunk>(plan.edits.append.back()).data.size();
        added.embedded = true;
        plan.edits.append.push_back(std::move(added));
      }
    }
    // The resolver may hand out a symlink of its own (split DWARF): compare the real files.
    std::string debug_file = RealPath(files.debug_path);
    bool separate_debug = !debug_file.empty() && debug_file != RealPath(files.code_path);
    if (debug_embedded_as_code) separate_debug = false;
    if (separate_debug && debug_info && have_debug.count(hex) == 0) {
      PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> data, ReadBytes(debug_file));
      plan.lines.push_back("debug info " + what + " from " + debug_file + " (" +
                           std::to_string(data.size()) + " bytes)");
      plan.edits.append.push_back(MakeBlob(fmt::BlobKind::kDebugInfo, m, std::move(data)));
      ++plan.debug_embedded;
    } else if (separate_debug && !debug_info) {
      plan.lines.push_back("  separate debug info at " + debug_file +
                           " (--debug-info embeds it)");
    }
  }
  for (const std::string& note : resolver.notes()) plan.lines.push_back("  note: " + note);
  if (plan.embedded > 0) plan.edits.set_features = fmt::kFeatureEmbeddedBinaries;
  return plan;
}

}  // namespace

int RunEmbed(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  const char* synopsis = "IN.ptar [--symbols DIR ...] [--debug-info] [-o OUT.ptar]";
  po::options_description options("embed options");
  options.add_options()
      ("symbols", po::value<std::vector<std::string>>()->default_value({}, ""),
       "directory to search by build id (DIR/.build-id/xx/rest[.debug], or any ELF file below "
       "DIR) after the recorded paths; repeatable")
      ("debug-info", "also embed separate debug files (DIR/.build-id/xx/rest.debug, "
       ".gnu_debuglink)")
      ("output,o", po::value<std::string>(), "write OUT.ptar instead of replacing IN.ptar");
  po::variables_map vm;
  if (auto exit = ParseCommandLine("embed", synopsis, args, options, {"file"}, vm)) return *exit;
  std::string in = vm["file"].as<std::string>();
  std::string out = vm.count("output") ? vm["output"].as<std::string>() : in;
  std::vector<std::string> dirs = vm["symbols"].as<std::vector<std::string>>();
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      return ReportError(MakeError(Errc::kNotFound, dir + ": --symbols needs a directory"));
    }
  }
  Result<SplicedArchive> archive = ReadForSplice(in);
  if (!archive) return ReportError(archive.error());
  Result<EmbedPlan> plan = Plan(*archive, dirs, vm.count("debug-info") > 0);
  if (!plan) return ReportError(plan.error());
  for (const std::string& line : plan->lines) std::printf("%s\n", line.c_str());
  if (!archive->complete) {
    std::printf("  note: %s has no End chunk (a cut-off capture); the output stays incomplete\n",
                in.c_str());
  }
  bool changed = !plan->edits.append.empty() || !plan->edits.replace.empty();
  if (changed || out != in) {
    std::string dir = fs::path(out).has_parent_path() ? fs::path(out).parent_path().string() : ".";
    Result<std::vector<uint8_t>> bytes = Splice(*archive, plan->edits, dir);
    if (!bytes) return ReportError(bytes.error());
    if (Status written = WriteFileAtomically(out, *bytes); !written) {
      return ReportError(written.error());
    }
  }
  std::printf("%s: %zu embedded, %zu debug files embedded, %zu already present, %zu not found%s\n",
              out.c_str(), plan->embedded, plan->debug_embedded, plan->present, plan->not_found,
              changed ? "" : " (archive unchanged)");
  return kExitOk;
}

}  // namespace ptscope::tools
