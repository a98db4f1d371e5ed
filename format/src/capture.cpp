// (see ptscope/capture.h)
#include "ptscope/capture.h"

#include <fstream>
#include <map>
#include <utility>

#include "ptscope/perf_data.h"

namespace ptscope::format {

bool IsPerfData(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  return in.read(magic, 8) && std::string(magic, 8) == "PERFILE2";
}

Result<Archive> OpenCapture(const std::string& path, const ReadOptions& options) {
  return IsPerfData(path) ? ImportPerfData(path, options) : ReadArchive(path, options);
}

std::string SidebandProblem::Describe() const {
  if (missing_attr) {
    return "sideband chunk " + std::to_string(chunk) + " names attr " + std::to_string(attr_id) +
           " but no SidebandAttr chunk describes it";
  }
  return "sideband chunk " + std::to_string(chunk) + " offset " + std::to_string(offset) + ": " +
         error;
}

std::vector<SidebandProblem> ForEachSidebandRecord(
    const Archive& archive, const std::function<void(perf::Record&& record)>& visit) {
  std::map<uint32_t, perf::RecordLayout> layouts;
  for (const SidebandAttrChunk& attr : archive.sideband_attrs) {
    layouts[attr.attr_id] = perf::RecordLayout{attr.sample_type, attr.sample_id_all};
  }
  std::vector<SidebandProblem> problems;
  for (size_t chunk = 0; chunk < archive.sideband.size(); ++chunk) {
    const SidebandChunk& sideband = archive.sideband[chunk];
    auto layout = layouts.find(sideband.attr_id);
    if (layout == layouts.end()) {
      problems.push_back({chunk, sideband.attr_id, true, 0, {}});
      continue;
    }
    perf::RecordIterator records(sideband.records, layout->second);
    while (auto next = records.Next()) {
      if (!*next) {
        problems.push_back({chunk, sideband.attr_id, false, records.offset(),
                            next->error().message});
        break;
      }
      visit(std::move(**next));
    }
  }
  return problems;
}

}  // namespace ptscope::format
