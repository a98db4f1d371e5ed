// (see ptscope/capture.h)
#include "ptscope/capture.h"

#include <charconv>
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

Result<uint64_t> MetadataNumber(const Archive& archive, std::string_view key, uint64_t fallback) {
  std::optional<std::string> text = archive.Get(key);
  if (!text || text->empty()) return fallback;
  const char* begin = text->data();
  const char* end = begin + text->size();
  int base = 10;
  if (text->size() > 2 && (*text)[0] == '0' && ((*text)[1] == 'x' || (*text)[1] == 'X')) {
    begin += 2;
    base = 16;
  }
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value, base);
  if (ec != std::errc() || ptr != end) {
    return Unexpected(Errc::kCorrupt, archive.path + ": metadata " + std::string(key) + "=\"" +
                                          *text + "\" is not a number");
  }
  return value;
}

Result<std::optional<perf::PerfTime>> CaptureTimeConversion(const Archive& archive) {
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t mult, MetadataNumber(archive, "time.mult"));
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t shift, MetadataNumber(archive, "time.shift"));
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t zero, MetadataNumber(archive, "time.zero"));
  if (mult == 0) return std::optional<perf::PerfTime>();
  if (shift > 63) {
    return Unexpected(Errc::kCorrupt, archive.path + ": metadata time.shift=" +
                                          std::to_string(shift) + " is out of range (0..63)");
  }
  if (mult > UINT32_MAX) {  // perf_event_mmap_page's time_mult is 32 bits
    return Unexpected(Errc::kCorrupt, archive.path + ": metadata time.mult=" +
                                          std::to_string(mult) + " is out of range (1..2^32-1)");
  }
  return std::optional<perf::PerfTime>(
      perf::PerfTime{static_cast<uint16_t>(shift), static_cast<uint32_t>(mult), zero});
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
