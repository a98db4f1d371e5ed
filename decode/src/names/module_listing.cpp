// ListModulesJson (ptscope/decode.h): the files a decode would use for each module, as JSON.
#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "capture/sideband_timeline.h"
#include "names/capture_resolver.h"
#include "ptscope/decode.h"
#include "sink/json_text.h"

namespace ptscope::decode {
namespace {

// {"origin", "path", "size", "mtime_ns", "build_id", "symtab", "debug_info"} of a resolved file,
// or null. A file the archive embeds was written to a private temp directory that is gone when
// the listing is read: its path and time are null (the archive's bytes identify it).
void AppendFile(std::string& out, const std::string& path, const std::string& origin) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) {
    out += "null";
    return;
  }
  const bool in_archive = origin == "archive";
  out += "{";
  AppendJsonKey(out, "origin");
  AppendJsonString(out, origin);
  out += ", ";
  AppendJsonKey(out, "path");
  std::error_code ec;
  // The file itself, not a link to it (.build-id links, the resolver's split-DWARF links).
  std::filesystem::path real = std::filesystem::canonical(path, ec);
  if (in_archive) out += "null";
  else AppendJsonString(out, ec ? path : real.string());
  out += ", \"size\": " + std::to_string(st.st_size) + ", \"mtime_ns\": ";
  if (in_archive) {
    out += "null";
  } else {
    out += std::to_string(static_cast<uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000ull +
                          static_cast<uint64_t>(st.st_mtim.tv_nsec));
  }
  Result<symbols::ElfInfo> elf = symbols::ReadElfInfo(path);
  out += ", ";
  AppendJsonKey(out, "build_id");
  AppendJsonHex(out, elf ? elf->build_id : std::vector<uint8_t>{});
  out += elf && elf->has_symtab ? ", \"symtab\": true" : ", \"symtab\": false";
  out += elf && elf->has_debug_info ? ", \"debug_info\": true}" : ", \"debug_info\": false}";
}

}  // namespace

Result<std::string> ListModulesJson(format::Archive& archive, const PipelineOptions& options,
                                    const std::string& decoder_version,
                                    const std::vector<uint8_t>& decoder_build_id) {
  SidebandTimeline timeline = SidebandTimeline::Build(archive);
  CaptureResolver files(options);
  PTSCOPE_TRY(files.AddArchiveBlobs(archive));
  symbols::ModuleResolver& resolver = files.resolver();
  std::string out = "{\"schema\": \"ptscope-modules\", \"version\": " +
                    std::to_string(kModuleListingJsonVersion) + ",\n \"pt_decode\": {";
  AppendJsonKey(out, "version");
  AppendJsonString(out, decoder_version);
  out += ", ";
  AppendJsonKey(out, "build_id");
  AppendJsonHex(out, decoder_build_id);
  out += "},\n \"modules\": [";
  // AddressSpace interns modules by (path, build id): each appears once, in mapping order.
  bool first = true;
  for (const symbols::Module& module : timeline.address_space().modules()) {
    out += first ? "\n  {" : ",\n  {";
    first = false;
    AppendJsonKey(out, "path");
    AppendJsonString(out, module.path);
    out += ", ";
    AppendJsonKey(out, "build_id");
    AppendJsonHex(out, module.build_id);
    out += ",\n   \"code\": ";
    if (module.path == "[vdso]") {  // decoded from the copy the recorder stored
      AppendFile(out, resolver.VdsoPath(0), "archive");
      out += ",\n   \"debug\": ";
      AppendFile(out, resolver.VdsoPath(0), "archive");
      out += ",\n   \"dwp\": null}";
      continue;
    }
    const symbols::ModuleFiles& found = resolver.Resolve(module.path, module.build_id);
    AppendFile(out, found.code_path, found.code_origin);
    out += ",\n   \"debug\": ";
    AppendFile(out, found.code_path.empty() ? std::string() : found.debug_path,
               found.debug_origin);
    out += ",\n   \"dwp\": ";
    AppendFile(out, found.dwp_path, "dwp");
    out += "}";
  }
  out += first ? "],\n \"notes\": [" : "\n ],\n \"notes\": [";
  std::vector<std::string> notes = timeline.notes();
  notes.insert(notes.end(), resolver.notes().begin(), resolver.notes().end());
  for (size_t i = 0; i < notes.size(); ++i) {
    out += i == 0 ? "\n  " : ",\n  ";
    AppendJsonString(out, notes[i]);
  }
  out += notes.empty() ? "]\n}\n" : "\n ]\n}\n";
  return out;
}

}  // namespace ptscope::decode
