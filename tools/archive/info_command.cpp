// pt-archive info FILE: a human summary of everything in an archive.
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <map>

#include "commands.h"
#include "ptscope/format.h"
#include "sideband_summary.h"

namespace ptscope::tools {
namespace {

namespace fmt = ptscope::format;

std::string FeatureList(uint64_t features) {
  static const std::pair<uint64_t, const char*> kNames[] = {
      {fmt::kFeatureEmulated, "emulated"}, {fmt::kFeatureSnapshot, "snapshot"},
      {fmt::kFeaturePerCpu, "per-cpu"}, {fmt::kFeatureEmbeddedBinaries, "embedded-binaries"},
      {fmt::kFeatureImportedPerf, "imported-perf"}};
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if (features & bit) out += std::string(out.empty() ? "" : ", ") + name;
    features &= ~bit;
  }
  if (features) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%sunknown 0x%" PRIx64, out.empty() ? "" : ", ", features);
    out += buf;
  }
  return out.empty() ? "none" : out;
}

std::string PieceFlags(uint32_t flags) {
  static const std::pair<uint32_t, const char*> kNames[] = {
      {fmt::kPtTruncated, "truncated"}, {fmt::kPtOverwritten, "overwritten"},
      {fmt::kPtPartial, "partial"}, {fmt::kPtSnapshot, "snapshot"}};
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if (flags & bit) out += std::string(out.empty() ? "" : "|") + name;
  }
  return out.empty() ? "-" : out;
}

std::string IsoTime(uint64_t unix_ns) {
  time_t secs = static_cast<time_t>(unix_ns / 1000000000u);
  tm utc{};
  gmtime_r(&secs, &utc);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09" PRIu64 "Z",
                utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min,
                utc.tm_sec, unix_ns % 1000000000u);
  return buf;
}

std::string Plural(uint64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

void PrintPtStreams(const fmt::Archive& a, bool all_pieces) {
  // Read without the PT bytes: each piece's size is in pt_refs.
  auto size_of = [&a](const fmt::PtDataChunk* p) {
    return a.pt_refs[static_cast<size_t>(p - a.pt_data.data())].size;
  };
  std::map<uint32_t, std::vector<const fmt::PtDataChunk*>> streams;
  for (const fmt::PtDataChunk& piece : a.pt_data) streams[piece.stream_id].push_back(&piece);
  std::printf("pt streams (%zu):\n", streams.size());
  constexpr size_t kListedPieces = 8;
  for (const auto& [id, pieces] : streams) {
    uint64_t bytes = 0, lost = 0, expected_offset = pieces.front()->stream_offset;
    for (const fmt::PtDataChunk* p : pieces) {
      bytes += size_of(p);
      lost += p->bytes_lost_before;
      if (p->stream_offset > expected_offset) lost += p->stream_offset - expected_offset;
      expected_offset = p->stream_offset + size_of(p);
    }
    const fmt::PtDataChunk& first = *pieces.front();
    std::printf("  stream %u: pid %u tid %u cpu %d: %" PRIu64 " bytes in %s, %" PRIu64
                " bytes lost\n",
                id, first.pid, first.tid, first.cpu, bytes, Plural(pieces.size(), "piece").c_str(),
                lost);
    if (!all_pieces && pieces.size() > kListedPieces) {
      std::printf("    (%zu pieces; --pieces lists them)\n", pieces.size());
      continue;
    }
    for (size_t i = 0; i < pieces.size(); ++i) {
      const fmt::PtDataChunk& p = *pieces[i];
      std::printf("    piece %zu: offset %" PRIu64 ", %" PRIu64 " bytes, tsc 0x%" PRIx64
                  ", snapshot %u, lost before %" PRIu64 ", flags %s\n",
                  i, p.stream_offset, size_of(&p), p.reference_tsc, p.snapshot_index,
                  p.bytes_lost_before, PieceFlags(p.flags).c_str());
    }
  }
}

void PrintSideband(const fmt::Archive& a) {
  SidebandSummary s = SummarizeSideband(a);
  std::string counts;
  for (const auto& [type, n] : s.records_by_type) {
    counts += (counts.empty() ? "" : ", ") + RecordTypeName(type) + " " + std::to_string(n);
  }
  std::printf("sideband: %s, %s, %s%s%s\n", Plural(a.sideband_attrs.size(), "attr").c_str(),
              Plural(a.sideband.size(), "chunk").c_str(), Plural(s.records, "record").c_str(),
              counts.empty() ? "" : " ", counts.empty() ? "" : ("(" + counts + ")").c_str());
  if (s.lost_events || s.aux_truncated) {
    std::printf("  losses: %" PRIu64 " events lost (LOST), %" PRIu64 " truncated AUX records\n",
                s.lost_events, s.aux_truncated);
  }
  for (const std::string& problem : s.problems) std::printf("  problem: %s\n", problem.c_str());
  std::printf("processes (%zu):\n", s.processes.size());
  for (const auto& [pid, p] : s.processes) {
    std::string threads;
    for (const auto& [tid, t] : p.threads) {
      threads += (threads.empty() ? "" : ", ") + std::to_string(tid) + " \"" + t.comm + "\"" +
                 (t.exited ? " (exited)" : "");
    }
    std::printf("  pid %u \"%s\" (ppid %u%s%s): threads %s\n", pid, p.comm.c_str(), p.ppid,
                p.exec ? ", exec" : "", p.exited ? ", exited" : "", threads.c_str());
  }
}

void PrintRest(const fmt::Archive& a) {
  std::printf("modules (%zu):\n", a.modules.size());
  for (const fmt::ModuleChunk& m : a.modules) {
    std::printf("  %s: build id %s, %" PRIu64 " bytes, %s\n", m.path.c_str(),
                m.build_id.empty() ? "unknown" : fmt::ToHex(m.build_id).c_str(), m.size,
                m.embedded ? "embedded" : "not embedded");
  }
  std::printf("blobs (%zu):\n", a.blobs.size());
  for (size_t i = 0; i < a.blobs.size(); ++i) {
    const fmt::BlobChunk& b = a.blobs[i];
    std::printf("  %s \"%s\": %" PRIu64 " bytes, pid %u, vaddr 0x%" PRIx64 ", build id %s\n",
                fmt::BlobKindName(b.kind), b.name.c_str(), a.blob_refs[i].size, b.pid, b.vaddr,
                b.build_id.empty() ? "none" : fmt::ToHex(b.build_id).c_str());
  }
  std::printf("markers (%zu):\n", a.markers.size());
  for (const fmt::MarkerChunk& m : a.markers) {
    std::printf("  %s: tsc %" PRIu64 ", pid %u, tid %u, cpu %d, value 0x%" PRIx64 ", \"%s\"\n",
                fmt::MarkerKindName(m.kind), m.tsc, m.pid, m.tid, m.cpu, m.value, m.text.c_str());
  }
  uint64_t pairs = 0;
  for (const fmt::TimeSyncChunk& t : a.time_syncs) pairs += t.tsc_and_clock_ns.size();
  std::printf("time sync: %s, %s\n", Plural(a.time_syncs.size(), "chunk").c_str(),
              Plural(pairs, "pair").c_str());
}

}  // namespace

// Each key once, where it first appears, with its value in force (the last: a recorder writes
// some again at the end, e.g. pt-record's time.* once the kernel has filled them in).
void PrintMetadata(const fmt::Archive& a) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> values;
  for (const auto& [key, value] : a.metadata) {
    std::vector<std::string>& seen = values[key];
    if (seen.empty()) order.push_back(key);
    if (seen.empty() || seen.back() != value) seen.push_back(value);
  }
  std::printf("metadata (%zu):\n", order.size());
  for (const std::string& key : order) {
    const std::vector<std::string>& seen = values[key];
    std::string earlier;
    for (size_t i = 0; i + 1 < seen.size(); ++i) earlier += (i ? ", " : "") + seen[i];
    std::printf("  %s = %s%s\n", key.c_str(), seen.back().c_str(),
                earlier.empty() ? "" : (" (earlier: " + earlier + ")").c_str());
  }
}

int RunInfo(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description options("info options");
  options.add_options()("pieces", "list every PT piece (default: up to 8 per stream)");
  po::variables_map vm;
  if (auto exit = ParseCommandLine("info", "FILE [--pieces]", args, options, {"file"}, vm)) {
    return *exit;
  }
  std::string path = vm["file"].as<std::string>();
  // Sizes only: neither the PT bytes nor the blobs are held.
  Result<fmt::Archive> archive =
      fmt::ReadArchive(path, fmt::ReadOptions{.keep_pt_bytes = false, .keep_blob_bytes = false});
  if (!archive) return ReportError(archive.error());
  const fmt::Archive& a = *archive;
  std::printf("archive: %s\n", path.c_str());
  std::printf("format: ptar %u.%u (needs reader version %u), %s\n", a.header.version_major,
              a.header.version_minor, a.header.min_reader_major,
              Plural(a.chunks_read, "chunk").c_str());
  std::printf("created: %s\n", IsoTime(a.header.created_unix_ns).c_str());
  std::printf("features: %s\n", FeatureList(a.header.features).c_str());
  std::printf("status: %s\n", !a.damage.empty() ? "damaged (see the line below)"
                              : a.complete       ? "complete"
                                                 : "incomplete (no End chunk: the capture was cut off)");
  PrintMetadata(a);
  PrintPtStreams(a, vm.count("pieces") > 0);
  PrintSideband(a);
  PrintRest(a);
  return InputStatus(path, a, "the information above is that of the intact chunks");
}

}  // namespace ptscope::tools
