// (see ptscope/capture.h)
#include "ptscope/capture.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <utility>

#include "perf_data/perf_data_parse.h"
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
  return ForEachSidebandRecordIn(archive, 0, archive.sideband.size(),
                                 [&](size_t, perf::Record&& record) { visit(std::move(record)); });
}

std::vector<SidebandProblem> ForEachSidebandRecordIn(
    const Archive& archive, size_t first, size_t end,
    const std::function<void(size_t chunk, perf::Record&& record)>& visit) {
  end = std::min(end, archive.sideband.size());
  std::map<uint32_t, perf::RecordLayout> layouts;
  for (const SidebandAttrChunk& attr : archive.sideband_attrs) {
    layouts[attr.attr_id] = perf::RecordLayout{attr.sample_type, attr.sample_id_all};
  }
  std::vector<SidebandProblem> problems;
  // Records not kept (ReadOptions::keep_sideband_bytes): each chunk read again, one at a time.
  const bool reread = !archive.sideband_offsets.empty();
  const bool reread_perf = !archive.sideband_ranges.empty();  // a perf.data's (ImportPerfData)
  std::unique_ptr<ArchiveReader> reader;
  std::unique_ptr<perf_data::ByteSource> perf_file;
  if (reread || reread_perf) {
    Status opened = Ok();
    if (reread) {
      Result<std::unique_ptr<ArchiveReader>> archive_reader = ArchiveReader::Open(archive.path);
      if (archive_reader) {
        reader = std::move(*archive_reader);
      } else {
        opened = std::move(archive_reader).error();
      }
    } else {
      Result<std::unique_ptr<perf_data::ByteSource>> file = perf_data::OpenFileSource(archive.path);
      if (file) {
        perf_file = std::move(*file);
      } else {
        opened = std::move(file).error();
      }
    }
    if (!opened) {
      // One problem for them all (each chunk's would say the same).
      if (first < end) {
        problems.push_back({first, archive.sideband[first].attr_id, false, 0,
                            "cannot read the sideband again (chunks " + std::to_string(first) +
                                " to " + std::to_string(end - 1) + "): " + opened.error().message,
                            end - first});
      }
      return problems;
    }
  }
  SidebandChunk again;
  for (size_t chunk = first; chunk < end; ++chunk) {
    const SidebandChunk* sideband = &archive.sideband[chunk];
    auto layout = layouts.find(sideband->attr_id);
    if (layout == layouts.end()) {
      problems.push_back({chunk, sideband->attr_id, true, 0, {}});
      continue;
    }
    if (reread) {
      Result<Chunk> read = reader->ReadChunkAt(archive.sideband_offsets[chunk]);
      auto* chunk_again = read ? std::get_if<SidebandChunk>(&*read) : nullptr;
      if (chunk_again == nullptr || chunk_again->attr_id != sideband->attr_id) {
        problems.push_back({chunk, sideband->attr_id, false, 0,
                            "read again at file offset " +
                                HexAddress(archive.sideband_offsets[chunk]) + ", " +
                                (read ? std::string("it is no longer this chunk (the file changed "
                                                    "since it was read)")
                                      : read.error().message),
                            1});
        continue;
      }
      again = std::move(*chunk_again);
      sideband = &again;
    } else if (reread_perf) {
      Result<std::vector<uint8_t>> records =
          perf_data::ReadSidebandRange(*perf_file, archive.sideband_ranges[chunk]);
      if (!records) {
        problems.push_back({chunk, sideband->attr_id, false, 0,
                            "read again from the data section's [" +
                                std::to_string(archive.sideband_ranges[chunk].begin) + ", " +
                                std::to_string(archive.sideband_ranges[chunk].end) +
                                "): " + records.error().message,
                            1});
        continue;
      }
      again.attr_id = sideband->attr_id;
      again.records = std::move(*records);
      sideband = &again;
    }
    perf::RecordIterator records(sideband->records, layout->second);
    while (auto next = records.Next()) {
      if (!*next) {
        problems.push_back({chunk, sideband->attr_id, false, records.offset(),
                            next->error().message});
        break;
      }
      visit(chunk, std::move(**next));
    }
  }
  return problems;
}

}  // namespace ptscope::format
