// Test helper: prints the parts of a .ptar that the pt-record tests check, one fact per line, so
// shell tests can compare them with readelf/stat output. Reads with the format library only.
#include <sys/stat.h>

#include <cstdio>

#include "ptscope/format.h"
#include "ptscope/perf_records.h"

using namespace ptscope;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: record_archive_dump FILE.ptar\n");
    return 2;
  }
  struct stat st {};
  if (stat(argv[1], &st) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  auto archive = format::ReadArchive(argv[1]);
  if (!archive) {
    std::fprintf(stderr, "%s\n", archive.error().message.c_str());
    return 1;
  }
  std::printf("mode %o\n", st.st_mode & 07777);
  std::printf("complete %d\n", archive->complete ? 1 : 0);
  for (const auto& [key, value] : archive->metadata) std::printf("meta %s=%s\n", key.c_str(), value.c_str());
  for (const auto& m : archive->modules)
    std::printf("module %s %s\n", m.path.c_str(), format::ToHex(m.build_id).c_str());
  for (const auto& b : archive->blobs)
    std::printf("blob %s %s pid %u size %zu\n", format::BlobKindName(b.kind), b.name.c_str(), b.pid,
                b.data.size());
  for (const auto& m : archive->markers)
    std::printf("marker %s value 0x%llx %s\n", format::MarkerKindName(m.kind),
                static_cast<unsigned long long>(m.value), m.text.c_str());
  std::printf("pt_chunks %zu\n", archive->pt_data.size());
  perf::RecordLayout layout;
  layout.sample_type = perf::kSampleTid | perf::kSampleTime | perf::kSampleCpu | perf::kSampleIdentifier;
  for (const auto& chunk : archive->sideband) {
    perf::RecordIterator it(chunk.records, layout);
    while (auto next = it.Next()) {
      if (!*next) {
        std::printf("bad_record %s\n", next->error().message.c_str());
        break;
      }
      if (const auto* mmap = std::get_if<perf::MmapRecord>(&(*next)->body))
        std::printf("mmap2 %s %s\n", mmap->filename.c_str(), format::ToHex(mmap->build_id).c_str());
      if (const auto* comm = std::get_if<perf::CommRecord>(&(*next)->body))
        std::printf("comm %s exec %d\n", comm->comm.c_str(), comm->exec ? 1 : 0);
    }
  }
  return 0;
}
