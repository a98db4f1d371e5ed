// perf.data -> Archive (format/PERF_DATA.md, "Import"). The parser has validated the file; here
// we map perf's view (AUXTRACE_INFO priv, AUXTRACE pieces, kernel sideband) onto archive chunks.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "../byte_io.h"
#include "perf_data_parse.h"
#include "ptscope/format.h"
#include "ptscope/pt_chunks.h"
#include "ptscope/perf_data.h"

namespace ptscope::format {
namespace {
using namespace perf_data;

constexpr uint32_t kTypeMmap = 1, kTypeComm = 3, kTypeExit = 4, kTypeFork = 7, kTypeMmap2 = 10,
                   kTypeAux = 11;
constexpr size_t kSidebandChunkBytes = 1u << 20;

uint64_t Priv(const ParsedPerfData& p, int index) {
  return static_cast<size_t>(index) < p.priv.size() ? p.priv[index] : 0;
}

using ::ptscope::format::HexAddress;

// Trailer field of a verbatim kernel record, if the layout has it and the record holds it.
std::optional<uint64_t> TrailerField(std::span<const uint8_t> rec, const TrailerLayout& t, int at) {
  if (at < 0 || rec.size() < 8 + t.size) return std::nullopt;
  return LoadLe(rec.data() + rec.size() - t.size + at, 8);
}

class Importer {
 public:
  Importer(const ParsedPerfData& p, const std::string& name, const ByteSource& source,
           const ReadOptions& options)
      : p_(p), name_(name), source_(source), options_(options) {}

  Result<Archive> Run() {
    archive_.path = name_;
    archive_.header.features = kFeatureImportedPerf;
    snapshot_ = Priv(p_, kPrivSnapshotMode) != 0;
    per_cpu_ = Priv(p_, kPrivPerCpuMmaps) != 0;
    if (snapshot_) archive_.header.features |= kFeatureSnapshot;
    if (per_cpu_) archive_.header.features |= kFeaturePerCpu;
    ScanSideband();
    AddMetadata();
    // The values perf's decoder would use, checked as an archive's are (perf itself divides by
    // a truncated time_mult and shifts by any time_shift).
    PTSCOPE_ASSIGN_OR_RETURN(
        archive_.time,
        ParseTimeConversion(archive_.metadata,
                            name_ + ": offset " + std::to_string(time_from_info_ ? p_.info_offset
                                                                                 : p_.tc_offset) +
                                (time_from_info_ ? " (AUXTRACE_INFO record)"
                                                 : " (TIME_CONV record)")));
    PTSCOPE_TRY(AddPtData());
    AddSideband();
    AddModules();
    archive_.damage = p_.damage;
    archive_.complete = p_.damage.empty();
    // An archive written from it says so (FORMAT.md "import.damage"), so that it never reads as
    // a whole capture.
    if (!p_.damage.empty()) Put("import.damage", name_ + ": " + DescribeDamage(p_.damage));
    return std::move(archive_);
  }

 private:
  const ParsedAttr* PtAttr() const {
    for (const ParsedAttr& a : p_.attrs)
      if (a.type == Priv(p_, kPrivPmuType)) return &a;
    return nullptr;
  }

  void Put(const std::string& key, const std::string& value) {
    archive_.metadata.emplace_back(key, value);
  }

  void AddMetadata() {
    Put("tool", "pt-archive import-perf");
    Put("capture.emulated", "0");
    Put("capture.mode", snapshot_ ? "snapshot" : "full");
    if (!p_.hostname.empty()) Put("host.name", p_.hostname);
    if (!p_.os_release.empty()) Put("kernel.release", p_.os_release);
    if (!p_.cmdline.empty()) Put("command", p_.cmdline);
    if (!p_.perf_version.empty()) Put("perf.version", p_.perf_version);
    AddCpuid();
    if (const ParsedAttr* pt = PtAttr()) AddConfig(*pt);
    Put("pt.pmu_type", std::to_string(Priv(p_, kPrivPmuType)));
    Put("pt.max_nonturbo_ratio", std::to_string(Priv(p_, kPrivMaxNonturboRatio)));
    Put("pt.cpuid15_eax", std::to_string(Priv(p_, kPrivTscCtcD)));
    Put("pt.cpuid15_ebx", std::to_string(Priv(p_, kPrivTscCtcN)));
    if (!p_.filter.empty()) Put("pt.filters", p_.filter.substr(0, p_.filter.find('\0')));
    Put("perf.have_sched_switch", std::to_string(Priv(p_, kPrivHaveSchedSwitch)));
    Put("perf.per_cpu_mmaps", per_cpu_ ? "1" : "0");
    // AUXTRACE_INFO is what perf's decoder uses; TIME_CONV only fills in when it has no
    // conversion (time_mult 0).
    const bool from_info = Priv(p_, kPrivTimeMult) != 0 || !p_.have_time_conv;
    time_from_info_ = from_info;
    Put("time.shift", std::to_string(from_info ? Priv(p_, kPrivTimeShift) : p_.tc_shift));
    Put("time.mult", std::to_string(from_info ? Priv(p_, kPrivTimeMult) : p_.tc_mult));
    Put("time.zero", std::to_string(from_info ? Priv(p_, kPrivTimeZero) : p_.tc_zero));
    Put("time.cap_user_time_zero", from_info ? std::to_string(Priv(p_, kPrivCapUserTimeZero))
                                             : std::string(p_.tc_cap_user_time_zero ? "1" : "0"));
    if (p_.samples_skipped) Put("perf.samples_skipped", std::to_string(p_.samples_skipped));
  }

  // HEADER_CPUID on x86: "vendor,family,model,stepping".
  void AddCpuid() {
    if (p_.cpuid.empty()) return;
    static const char* kKeys[] = {"cpu.vendor", "cpu.family", "cpu.model", "cpu.stepping"};
    size_t start = 0;
    for (const char* key : kKeys) {
      size_t comma = p_.cpuid.find(',', start);
      std::string field = p_.cpuid.substr(start, comma == std::string::npos ? comma : comma - start);
      if (!field.empty()) Put(key, field);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }

  void AddConfig(const ParsedAttr& pt) {
    uint64_t c = pt.config;
    auto bit = [&](uint64_t mask) { return std::string((c & mask) ? "1" : "0"); };
    auto field = [&](uint64_t mask) { return (c & mask) >> std::countr_zero(mask); };
    Put("pt.config", HexAddress(c));
    Put("pt.tsc", bit(Priv(p_, kPrivTscBit) ? Priv(p_, kPrivTscBit) : kCfgTsc));
    Put("pt.mtc", bit(Priv(p_, kPrivMtcBit) ? Priv(p_, kPrivMtcBit) : kCfgMtc));
    Put("pt.mtc_period", std::to_string(field(kCfgMtcPeriodMask)));
    Put("pt.cyc", bit(kCfgCyc));
    Put("pt.cyc_thresh", std::to_string(field(kCfgCycThreshMask)));
    Put("pt.psb_period", std::to_string(uint64_t{1} << (field(kCfgPsbPeriodMask) + 11)));
    Put("pt.noretcomp", bit(Priv(p_, kPrivNoretcompBit) ? Priv(p_, kPrivNoretcompBit) : kCfgNoretcomp));
    Put("pt.branch", bit(kCfgBranch));
    Put("pt.user", (pt.flags & kAttrExcludeUser) ? "0" : "1");
    Put("pt.kernel", (pt.flags & kAttrExcludeKernel) ? "0" : "1");
  }

  // Learns tid -> pid (for per-thread pieces) and collects AUX record flags per stream.
  void ScanSideband() {
    for (const ParsedRecord& r : p_.sideband) {
      uint32_t type = static_cast<uint32_t>(LoadLe(r.bytes.data(), 4));
      if ((type == kTypeComm && r.bytes.size() >= 16)) {
        pid_of_[static_cast<uint32_t>(LoadLe(r.bytes.data() + 12, 4))] =
            static_cast<uint32_t>(LoadLe(r.bytes.data() + 8, 4));
      } else if ((type == kTypeFork || type == kTypeExit) && r.bytes.size() >= 24) {
        pid_of_[static_cast<uint32_t>(LoadLe(r.bytes.data() + 16, 4))] =
            static_cast<uint32_t>(LoadLe(r.bytes.data() + 8, 4));
      } else if (type == kTypeAux && r.bytes.size() >= 32) {
        AuxFlag f{LoadLe(r.bytes.data() + 8, 8), LoadLe(r.bytes.data() + 16, 8),
                  LoadLe(r.bytes.data() + 24, 8)};
        auto key = per_cpu_ ? TrailerField(r.bytes, p_.trailer, p_.trailer.cpu)
                            : TrailerField(r.bytes, p_.trailer, p_.trailer.tid);
        if (key && f.flags) aux_flags_[per_cpu_ ? (*key & 0xffffffff) : (*key >> 32)].push_back(f);
      }
    }
  }

  struct AuxFlag {
    uint64_t offset, size, flags;
  };

  uint32_t PieceFlags(uint64_t key, uint64_t offset, uint64_t size) const {
    auto it = aux_flags_.find(key);
    if (it == aux_flags_.end()) return 0;
    uint32_t flags = 0;
    for (const AuxFlag& f : it->second) {
      bool overlap = f.offset < offset + size && offset < f.offset + std::max<uint64_t>(f.size, 1);
      if (!overlap) continue;
      if (f.flags & 1) flags |= kPtTruncated;
      if (f.flags & 4) flags |= kPtPartial;
    }
    return flags;
  }

  // Each AUXTRACE record's trace bytes become a PtDataChunk's data, or, with keep_pt_bytes =
  // false, stay in the file: Archive::pt_refs then says where (raw bytes, not an archive chunk).
  Status AddPtData() {
    std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> stream_ids;
    std::map<uint32_t, uint64_t> next_offset, pieces;
    for (const ParsedAuxtrace& a : p_.auxtrace) {
      PtDataChunk c;
      auto key = std::make_tuple(a.idx, a.cpu, a.tid);
      auto [it, fresh] = stream_ids.emplace(key, static_cast<uint32_t>(stream_ids.size()));
      c.stream_id = it->second;
      if (per_cpu_) {
        c.cpu = static_cast<int32_t>(a.cpu);
      } else {
        c.cpu = -1;
        c.tid = a.tid;
        auto pid = pid_of_.find(a.tid);
        c.pid = pid != pid_of_.end() ? pid->second : a.tid;
      }
      c.stream_offset = a.offset;
      c.reference_tsc = a.reference;
      c.flags = PieceFlags(per_cpu_ ? a.cpu : a.tid, a.offset, a.size);
      if (a.cut) c.flags |= kPtTruncated;  // the file ends inside its trace bytes
      if (snapshot_) {
        c.flags |= kPtSnapshot;
        c.snapshot_index = static_cast<uint32_t>(pieces[c.stream_id]);
      } else if (!fresh && a.offset > next_offset[c.stream_id]) {
        c.bytes_lost_before = a.offset - next_offset[c.stream_id];
      }
      ++pieces[c.stream_id];
      next_offset[c.stream_id] = a.offset + a.size;
      if (options_.keep_pt_bytes) {
        c.data.resize(static_cast<size_t>(a.size));
        PTSCOPE_TRY(source_.Read(a.data_offset, c.data.size(), c.data.data()));
      } else {
        archive_.pt_refs.push_back(
            Archive::PtDataRef{.chunk_offset = a.data_offset, .size = a.size, .raw = true});
      }
      archive_.pt_data.push_back(std::move(c));
    }
    return Ok();
  }

  // One SidebandAttrChunk per perf attr; the records (all sharing one trailer layout, checked by
  // the parser) go in time order into chunks naming the tracking attr.
  void AddSideband() {
    uint32_t tracking = 1;
    for (size_t i = 0; i < p_.attrs.size(); ++i) {
      const ParsedAttr& a = p_.attrs[i];
      SidebandAttrChunk s;
      s.attr_id = static_cast<uint32_t>(i + 1);
      s.sample_type = a.sample_type;
      s.read_format = a.read_format;
      s.sample_id_all = (a.flags & kAttrSampleIdAll) != 0;
      s.ids = a.ids;
      s.raw_attr = a.raw;
      if (a.flags & (kAttrMmap | kAttrMmap2 | kAttrComm) && tracking == 1 && i > 0) tracking = s.attr_id;
      archive_.sideband_attrs.push_back(std::move(s));
    }
    if (!options_.keep_sideband_bytes) {
      // Left in the file: a chunk per range, in file order (time order is the reader's to make:
      // ptscope/capture.h, ForEachSidebandRecord).
      SidebandChunk left;
      left.attr_id = tracking;
      archive_.sideband.assign(p_.sideband_ranges.size(), left);
      archive_.sideband_ranges = p_.sideband_ranges;
      return;
    }
    std::vector<const ParsedRecord*> order;
    for (const ParsedRecord& r : p_.sideband) order.push_back(&r);
    std::stable_sort(order.begin(), order.end(), [&](const ParsedRecord* a, const ParsedRecord* b) {
      return TrailerField(a->bytes, p_.trailer, p_.trailer.time).value_or(0) <
             TrailerField(b->bytes, p_.trailer, p_.trailer.time).value_or(0);
    });
    SidebandChunk chunk;
    chunk.attr_id = tracking;
    for (const ParsedRecord* r : order) {
      if (chunk.records.size() + r->bytes.size() > kSidebandChunkBytes) {
        archive_.sideband.push_back(std::move(chunk));
        chunk = SidebandChunk{};
        chunk.attr_id = tracking;
      }
      chunk.records.insert(chunk.records.end(), r->bytes.begin(), r->bytes.end());
    }
    if (!chunk.records.empty()) archive_.sideband.push_back(std::move(chunk));
  }

  // Executable file mappings (MMAP2 with PROT_EXEC, MMAP without MISC_MMAP_DATA) of absolute
  // paths; the build id comes from the MMAP2 record or the BUILD_ID feature.
  void AddModules() {
    std::set<std::string> seen;
    for (const ParsedRecord& r : p_.sideband) {
      uint32_t type = static_cast<uint32_t>(LoadLe(r.bytes.data(), 4));
      uint16_t misc = static_cast<uint16_t>(LoadLe(r.bytes.data() + 4, 2));
      size_t name_at = type == kTypeMmap2 ? 72 : 40;
      if ((type != kTypeMmap && type != kTypeMmap2) || r.bytes.size() < name_at + p_.trailer.size) continue;
      if (type == kTypeMmap2 && !(LoadLe(r.bytes.data() + 64, 4) & 0x4)) continue;  // PROT_EXEC
      if (type == kTypeMmap && (misc & 0x2000)) continue;                           // MMAP_DATA
      const char* name = reinterpret_cast<const char*>(r.bytes.data() + name_at);
      std::string path(name, strnlen(name, r.bytes.size() - p_.trailer.size - name_at));
      if (path.empty() || path[0] != '/' || !seen.insert(path).second) continue;
      ModuleChunk m;
      m.path = path;
      if (type == kTypeMmap2 && (misc & 0x4000)) {
        size_t len = std::min<size_t>(r.bytes[40], 20);
        m.build_id.assign(r.bytes.begin() + 44, r.bytes.begin() + 44 + len);
      } else if (auto it = p_.build_ids.find(path); it != p_.build_ids.end()) {
        m.build_id = it->second;
      }
      archive_.modules.push_back(std::move(m));
    }
  }

  const ParsedPerfData& p_;
  const std::string& name_;
  const ByteSource& source_;
  const ReadOptions& options_;
  Archive archive_;
  bool snapshot_ = false, per_cpu_ = false;
  bool time_from_info_ = true;  // the time.* metadata came from AUXTRACE_INFO, not TIME_CONV
  std::map<uint32_t, uint32_t> pid_of_;
  std::map<uint64_t, std::vector<AuxFlag>> aux_flags_;
};

}  // namespace

Result<Archive> ImportPerfDataFromBytes(std::vector<uint8_t> bytes, const std::string& name) {
  std::unique_ptr<ByteSource> source = MakeBufferSource(std::move(bytes), name);
  PTSCOPE_ASSIGN_OR_RETURN(ParsedPerfData parsed, ParsePerfData(*source, name));
  return Importer(parsed, name, *source, ReadOptions{}).Run();
}

Result<Archive> ImportPerfData(const std::string& path, const ReadOptions& options) {
  PTSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenFileSource(path));
  PTSCOPE_ASSIGN_OR_RETURN(
      ParsedPerfData parsed,
      ParsePerfData(*source, path, ParseOptions{.keep_switch_records = options.keep_sideband_bytes}));
  return Importer(parsed, path, *source, options).Run();
}

Status WriteImportedArchive(const Archive& archive, const std::string& out_path,
                            const WriterOptions& options) {
  PTSCOPE_ASSIGN_OR_RETURN(auto writer, ArchiveWriter::Create(out_path, options));
  PTSCOPE_TRY(writer->Write(MetadataChunk{archive.metadata}));
  for (const auto& c : archive.sideband_attrs) PTSCOPE_TRY(writer->Write(c));
  // Sideband chunks hold their records in time order (FORMAT.md): an import that left them in
  // the file (keep_sideband_bytes = false) has them by file range, in file order.
  PTSCOPE_CHECK(archive.sideband_ranges.empty());
  for (const auto& c : archive.sideband) PTSCOPE_TRY(writer->Write(c));
  for (const auto& c : archive.modules) PTSCOPE_TRY(writer->Write(c));
  for (const auto& c : archive.blobs) PTSCOPE_TRY(writer->Write(c));
  PtChunkReader chunks(archive.path);
  Status status = Ok();
  for (size_t i = 0; i < archive.pt_data.size() && status; ++i) {
    if (i >= archive.pt_refs.size()) {  // read with keep_pt_bytes: the bytes are in the chunk
      status = writer->Write(archive.pt_data[i]);
      continue;
    }
    const Archive::PtDataRef& ref = archive.pt_refs[i];
    PTSCOPE_CHECK(ref.raw);  // an archive from ImportPerfData, not ReadArchive
    Result<std::span<const uint8_t>> bytes = chunks.Read(ref);
    if (!bytes) {
      status = std::move(bytes).error();
      break;
    }
    PtDataChunk piece = archive.pt_data[i];
    piece.data.assign(bytes->begin(), bytes->end());
    chunks.Forget();  // one copy of the piece at a time
    status = writer->Write(piece);
  }
  PTSCOPE_TRY(status);
  return writer->Close();
}

}  // namespace ptscope::format
