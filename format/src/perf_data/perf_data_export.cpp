// Archive -> perf.data (format/PERF_DATA.md, "Export"): one intel_pt attr, AUXTRACE_INFO with the
// Intel PT priv array, TIME_CONV, the sideband re-trailed for that attr, one AUXTRACE record per
// PT piece, then the BUILD_ID, HOSTNAME, OSRELEASE, CPUID and AUXTRACE-index features.
//
// The file is laid out as parts (bytes, or one PT piece's bytes): written to a file, each piece is
// fetched when its turn comes (read again from the archive when it was read without its PT
// bytes), so that one piece at a time is in memory, whatever the length of the capture.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

#include "../byte_io.h"
#include "perf_data_layout.h"
#include "ptscope/output_file.h"
#include "ptscope/perf_data.h"
#include "ptscope/perf_time.h"
#include "ptscope/pt_chunks.h"

namespace ptscope::format {
namespace {
using namespace perf_data;

constexpr uint64_t kExportId = 1;  // the one sample id of the exported attr
constexpr uint64_t kExportSampleType = (1ull << 0) | (1ull << 1) | (1ull << 2) | (1ull << 7) |
                                       (1ull << 16);  // IP|TID|TIME|CPU|IDENTIFIER
constexpr uint64_t kDefaultSidebandSampleType = 0x10086;  // the team convention
constexpr uint64_t kDefaultPmuType = 8;
constexpr uint32_t kTypeSample = 9, kTypeSwitch = 14, kTypeSwitchCpuWide = 15;

Error ExportError(Errc code, const std::string& what) {
  return MakeError(code, "export-perf: " + what);
}

std::optional<uint64_t> GetU64(const Archive& a, std::string_view key) {
  auto v = a.Get(key);
  if (!v || v->empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(v->c_str(), &end, 0);  // decimal or 0x hex
  if (errno != 0 || *end != '\0') return std::nullopt;
  return x;
}

// Written to the perf.data as 64-bit fields; Archive::time has checked the values
// (shift <= 63, 0 < mult < 2^32).
struct TimeConv {
  uint64_t shift = 0, mult = 0, zero = 0, cap_user_time_zero = 0;
  uint64_t NsToTsc(uint64_t ns) const {
    if (mult == 0) return ns;
    const ptscope::perf::PerfTime time{static_cast<uint16_t>(shift), static_cast<uint32_t>(mult),
                                       zero};
    return time.NsToTsc(ns);
  }
};

// PT bytes of archive.pt_data[i] (size: PtSize(archive, i)): held in the chunk, or read again
// from the file when the archive was read without them (Archive::pt_refs).
uint64_t PtSize(const Archive& a, size_t i) {
  const PtDataChunk& c = a.pt_data[i];
  return c.data.empty() && i < a.pt_refs.size() ? a.pt_refs[i].size : c.data.size();
}

class PtSource {
 public:
  explicit PtSource(const Archive& a) : a_(a), chunks_(a.path) {}

  Result<std::span<const uint8_t>> Get(size_t i) {
    const PtDataChunk& c = a_.pt_data[i];
    if (c.data.size() == PtSize(a_, i)) return std::span<const uint8_t>(c.data);
    Result<std::span<const uint8_t>> bytes = chunks_.Read(a_.pt_refs[i]);
    if (!bytes) return ExportError(bytes.error().code, bytes.error().message);
    return bytes;
  }

 private:
  const Archive& a_;
  PtChunkReader chunks_;
};

// The exported file, in order: bytes, or the PT bytes of pt_data[piece] and `pad` zeros.
struct Part {
  std::vector<uint8_t> bytes;
  size_t piece = SIZE_MAX;
  uint64_t pad = 0;
};

// Writes the parts in order through `put` (a span of bytes at a time).
template <typename Put>
Status EmitParts(const Archive& a, std::vector<Part>& parts, Put&& put) {
  PtSource source(a);
  static const uint8_t kZeros[8] = {};
  for (Part& part : parts) {
    if (part.piece == SIZE_MAX) {
      PTSCOPE_TRY(put(std::span<const uint8_t>(part.bytes)));
      part.bytes = {};
      continue;
    }
    PTSCOPE_ASSIGN_OR_RETURN(std::span<const uint8_t> pt, source.Get(part.piece));
    PTSCOPE_TRY(put(pt));
    PTSCOPE_TRY(put(std::span<const uint8_t>(kZeros, static_cast<size_t>(part.pad))));
  }
  return Ok();
}

class Exporter {
 public:
  explicit Exporter(const Archive& a) : a_(a) {}

  Result<std::vector<Part>> Run() {
    if (a_.pt_data.empty()) {
      return ExportError(Errc::kInvalidArgument,
                         a_.path + ": the archive holds no PT data chunks; nothing to export");
    }
    PTSCOPE_TRY(ChooseMode());
    ChooseConfig();
    PTSCOPE_TRY(CollectSideband());
    std::vector<uint8_t> data;
    ByteWriter w(data);
    WriteAuxtraceInfo(w);
    WriteTimeConv(w);
    w.Bytes(sideband_);
    std::vector<std::pair<uint64_t, uint64_t>> index;  // offsets relative to the data section
    std::vector<Part> data_parts;
    WriteAuxtrace(w, &index, &data_parts);
    return Assemble(data_parts, index);
  }

 private:
  Status ChooseMode() {
    bool any_cpu = false, any_thread = false;
    for (const PtDataChunk& c : a_.pt_data) (c.cpu >= 0 ? any_cpu : any_thread) = true;
    if (any_cpu && any_thread) {
      return ExportError(Errc::kUnsupported,
                         a_.path + ": PT data mixes per-CPU (cpu >= 0) and per-thread (cpu -1) "
                                   "streams; perf.data holds one kind");
    }
    per_cpu_ = any_cpu;
    snapshot_ = a_.Get("capture.mode").value_or("") == "snapshot";
    for (const PtDataChunk& c : a_.pt_data) snapshot_ |= (c.flags & kPtSnapshot) != 0;
    return Ok();
  }

  // attr.config from pt.config, or rebuilt from the individual pt.* keys.
  void ChooseConfig() {
    if (auto c = GetU64(a_, "pt.config")) {
      config_ = *c;
    } else {
      config_ = kCfgPt;
      if (GetU64(a_, "pt.branch").value_or(1)) config_ |= kCfgBranch;
      if (GetU64(a_, "pt.tsc").value_or(0)) config_ |= kCfgTsc;
      if (GetU64(a_, "pt.mtc").value_or(0)) config_ |= kCfgMtc;
      if (GetU64(a_, "pt.cyc").value_or(0)) config_ |= kCfgCyc;
      if (GetU64(a_, "pt.noretcomp").value_or(0)) config_ |= kCfgNoretcomp;
      config_ |= (GetU64(a_, "pt.mtc_period").value_or(0) & 0xf) << 14;
      config_ |= (GetU64(a_, "pt.cyc_thresh").value_or(0) & 0xf) << 19;
    }
    timed_ = (config_ & kCfgTsc) != 0;
    if (a_.time) {
      tc_.shift = a_.time->perf.shift;
      tc_.mult = a_.time->perf.mult;
      tc_.zero = a_.time->perf.zero;
      tc_.cap_user_time_zero = a_.Get("time.cap_user_time_zero") ? a_.time->cap_user_time_zero
                                                                 : timed_;
    } else {
      // No recorded conversion: assume pt-emulate's virtual clock (ns = tsc / GHz), with a mult
      // perf can hold (1..2^32-1) whatever the metadata says the frequency is.
      double ghz = std::strtod(a_.Get("emulate.virtual_ghz").value_or("1").c_str(), nullptr);
      if (!(ghz > 0)) ghz = 1;
      tc_.shift = 10;
      tc_.mult = static_cast<uint64_t>(std::clamp(std::round(1024.0 / ghz), 1.0, 4294967295.0));
      tc_.zero = 0;
      tc_.cap_user_time_zero = timed_;  // perf 6.1 needs it for timed decoding
    }
  }

  // Re-trails every kernel record of every Sideband chunk for the exported attr (the body is
  // kept verbatim; pid/tid, time and cpu move to the new trailer; the id becomes kExportId).
  Status CollectSideband() {
    std::map<uint32_t, const SidebandAttrChunk*> attrs;
    for (const SidebandAttrChunk& s : a_.sideband_attrs) attrs[s.attr_id] = &s;
    ByteWriter w(sideband_);
    for (size_t ci = 0; ci < a_.sideband.size(); ++ci) {
      const SidebandChunk& chunk = a_.sideband[ci];
      auto it = attrs.find(chunk.attr_id);
      TrailerLayout in = it != attrs.end()
                             ? MakeTrailerLayout(it->second->sample_type, it->second->sample_id_all)
                             : MakeTrailerLayout(kDefaultSidebandSampleType, true);
      const std::vector<uint8_t>& b = chunk.records;
      for (size_t at = 0; at < b.size();) {
        uint16_t size = b.size() - at >= 8 ? static_cast<uint16_t>(LoadLe(&b[at + 6], 2)) : 0;
        if (size < 8 + in.size || size > b.size() - at) {
          return ExportError(Errc::kCorrupt, a_.path + ": sideband chunk " + std::to_string(ci) +
                                                 ": record at offset " + std::to_string(at) +
                                                 " has a bad size " + std::to_string(size));
        }
        if (size - in.size + 32 > 0xffff) {
          return ExportError(Errc::kUnsupported, a_.path + ": sideband chunk " + std::to_string(ci) +
                                                     ": record at offset " + std::to_string(at) +
                                                     " is too large for the exported trailer");
        }
        AppendRecord(w, std::span<const uint8_t>(&b[at], size), in);
        at += size;
      }
    }
    return Ok();
  }

  void AppendRecord(ByteWriter& w, std::span<const uint8_t> rec, const TrailerLayout& in) {
    uint32_t type = static_cast<uint32_t>(LoadLe(rec.data(), 4));
    if (type >= kUserRecordStart || type == kTypeSample) return;  // not kernel sideband
    if (type == kTypeSwitch) have_switch_ = std::max(have_switch_, 2);
    if (type == kTypeSwitchCpuWide) have_switch_ = 3;
    const uint8_t* trailer = rec.data() + rec.size() - in.size;
    auto field = [&](int at) { return at >= 0 ? LoadLe(trailer + at, 8) : 0; };
    uint64_t time = field(in.time);
    max_time_ = std::max(max_time_, time);
    size_t body = rec.size() - in.size;
    w.U32(type);
    w.U16(static_cast<uint16_t>(LoadLe(rec.data() + 4, 2)));
    w.U16(static_cast<uint16_t>(body + 32));
    w.Bytes(rec.subspan(8, body - 8));
    w.U64(field(in.tid));
    w.U64(time);
    w.U64(field(in.cpu));
    w.U64(kExportId);
  }

  void WriteAuxtraceInfo(ByteWriter& w) {
    uint64_t priv[kPrivCount] = {};
    priv[kPrivPmuType] = GetU64(a_, "pt.pmu_type").value_or(kDefaultPmuType);
    priv[kPrivTimeShift] = tc_.shift;
    priv[kPrivTimeMult] = tc_.mult;
    priv[kPrivTimeZero] = tc_.zero;
    priv[kPrivCapUserTimeZero] = tc_.cap_user_time_zero;
    priv[kPrivTscBit] = kCfgTsc;
    priv[kPrivNoretcompBit] = kCfgNoretcomp;
    priv[kPrivHaveSchedSwitch] = static_cast<uint64_t>(have_switch_);
    priv[kPrivSnapshotMode] = snapshot_ ? 1 : 0;
    priv[kPrivPerCpuMmaps] = per_cpu_ ? 1 : 0;
    priv[kPrivMtcBit] = kCfgMtc;
    priv[kPrivMtcFreqBits] = kCfgMtcPeriodMask;
    priv[kPrivTscCtcN] = GetU64(a_, "pt.cpuid15_ebx").value_or(0);
    priv[kPrivTscCtcD] = GetU64(a_, "pt.cpuid15_eax").value_or(0);
    priv[kPrivCycBit] = kCfgCyc;
    priv[kPrivMaxNonturboRatio] = GetU64(a_, "pt.max_nonturbo_ratio").value_or(0);
    std::string filter = a_.Get("pt.filters").value_or("");
    priv[kPrivFilterStrLen] = filter.size();
    size_t filter_bytes = filter.empty() ? 0 : (filter.size() + 1 + 7) / 8 * 8;
    pmu_type_ = priv[kPrivPmuType];
    w.U32(kRecordAuxtraceInfo);
    w.U16(0);
    w.U16(static_cast<uint16_t>(16 + 8 * kPrivCount + filter_bytes));
    w.U32(kAuxtraceIntelPt);
    w.U32(0);
    for (uint64_t v : priv) w.U64(v);
    w.Bytes(filter);
    w.Zeros(filter_bytes - filter.size());
  }

  void WriteTimeConv(ByteWriter& w) {
    w.U32(kRecordTimeConv);
    w.U16(0);
    w.U16(56);
    w.U64(tc_.shift);
    w.U64(tc_.mult);
    w.U64(tc_.zero);
    w.U64(0);  // time_cycles
    w.U64(0);  // time_mask
    w.U8(static_cast<uint8_t>(tc_.cap_user_time_zero));
    w.Zeros(7);  // cap_user_time_short, reserved
  }

  // The AUXTRACE records into `w` (whose bytes so far are the data section's start); each one's
  // PT bytes become a part of their own, between the parts of `w`'s bytes.
  void WriteAuxtrace(ByteWriter& w, std::vector<std::pair<uint64_t, uint64_t>>* index,
                     std::vector<Part>* parts) {
    std::map<uint32_t, uint32_t> idx_of;
    uint64_t fallback_reference = std::max<uint64_t>(1, tc_.NsToTsc(max_time_));
    uint64_t written = 0;  // data section bytes already moved into `parts`
    for (size_t i = 0; i < a_.pt_data.size(); ++i) {
      const PtDataChunk& c = a_.pt_data[i];
      auto [it, fresh] = idx_of.emplace(c.stream_id, static_cast<uint32_t>(idx_of.size()));
      const uint64_t size = PtSize(a_, i);
      uint64_t padded = (size + 7) / 8 * 8;  // perf pads pieces to 8 with PAD packets
      index->emplace_back(written + w.size(), kAuxtraceRecordSize);
      w.U32(kRecordAuxtrace);
      w.U16(0);
      w.U16(kAuxtraceRecordSize);
      w.U64(padded);
      w.U64(c.stream_offset);
      // perf 6.1 takes the TSC's top byte from `reference` and crashes on 0 in timed mode.
      w.U64(c.reference_tsc ? c.reference_tsc : fallback_reference);
      w.U32(it->second);
      w.U32(per_cpu_ ? 0xffffffffu : c.tid);
      w.U32(per_cpu_ ? static_cast<uint32_t>(c.cpu) : 0xffffffffu);
      w.U32(0);
      written += w.size() + padded;
      parts->push_back(Part{.bytes = std::move(w.buffer())});
      w.buffer().clear();
      parts->push_back(Part{.bytes = {}, .piece = i, .pad = padded - size});
    }
    parts->push_back(Part{.bytes = std::move(w.buffer())});
    w.buffer().clear();
  }

  std::vector<uint8_t> Attr() const {
    std::vector<uint8_t> attr;
    ByteWriter w(attr);
    w.U32(static_cast<uint32_t>(pmu_type_));
    w.U32(kAttrSizeWritten);
    w.U64(config_);
    w.U64(1);  // sample_period
    w.U64(kExportSampleType);
    w.U64(0);  // read_format
    uint64_t flags = kAttrSampleIdAll | kAttrExcludeHv | kAttrDisabled;
    if (GetU64(a_, "pt.kernel").value_or(0) == 0) flags |= kAttrExcludeKernel;
    if (GetU64(a_, "pt.user").value_or(1) == 0) flags |= kAttrExcludeUser;
    if (have_switch_) flags |= kAttrContextSwitch;
    w.U64(flags);
    w.Zeros(kAttrSizeWritten - attr.size());
    return attr;
  }

  static void HeaderString(ByteWriter& w, const std::string& s) {
    uint32_t len = static_cast<uint32_t>((s.size() + 1 + 63) / 64 * 64);  // perf's NAME_ALIGN
    w.U32(len);
    w.Bytes(s);
    w.Zeros(len - s.size());
  }

  // Feature payloads by bit, in ascending bit order.
  std::map<int, std::vector<uint8_t>> Features(const std::vector<std::pair<uint64_t, uint64_t>>& index,
                                               uint64_t data_offset) const {
    std::map<int, std::vector<uint8_t>> out;
    std::vector<uint8_t> ids;
    ByteWriter b(ids);
    for (const ModuleChunk& m : a_.modules) {
      if (m.build_id.empty() || m.build_id.size() > 20) continue;
      size_t name_len = (m.path.size() + 1 + 63) / 64 * 64;
      b.U32(kRecordHeaderBuildId);
      b.U16(static_cast<uint16_t>(2 | kMiscBuildIdSize));  // PERF_RECORD_MISC_USER
      b.U16(static_cast<uint16_t>(36 + name_len));
      b.I32(-1);  // host machine
      b.Bytes(m.build_id);
      b.Zeros(20 - m.build_id.size());
      b.U8(static_cast<uint8_t>(m.build_id.size()));
      b.Zeros(3);
      b.Bytes(m.path);
      b.Zeros(name_len - m.path.size());
    }
    if (!ids.empty()) out[kFeatBuildId] = std::move(ids);
    auto str = [&](int bit, std::string_view key) {
      if (auto v = a_.Get(key)) {
        ByteWriter w(out[bit]);
        HeaderString(w, *v);
      }
    };
    str(kFeatHostname, "host.name");
    str(kFeatOsRelease, "kernel.release");
    auto vendor = a_.Get("cpu.vendor");
    if (vendor) {
      ByteWriter w(out[kFeatCpuid]);
      HeaderString(w, *vendor + "," + a_.Get("cpu.family").value_or("0") + "," +
                          a_.Get("cpu.model").value_or("0") + "," +
                          a_.Get("cpu.stepping").value_or("0"));
    }
    ByteWriter w(out[kFeatAuxtrace]);
    w.U64(index.size());
    for (auto [offset, size] : index) {
      w.U64(data_offset + offset);
      w.U64(size);
    }
    return out;
  }

  // header | ids | attr + ids section | data | feature table | feature payloads
  std::vector<Part> Assemble(std::vector<Part>& data_parts,
                             const std::vector<std::pair<uint64_t, uint64_t>>& index) const {
    uint64_t data_size = 0;
    for (const Part& part : data_parts) {
      data_size += part.piece == SIZE_MAX ? part.bytes.size() : PtSize(a_, part.piece) + part.pad;
    }
    const uint64_t ids_offset = kFileHeaderSize;
    const uint64_t attrs_offset = ids_offset + 8;
    const uint64_t attr_entry = kAttrSizeWritten + kSectionSize;
    const uint64_t data_offset = attrs_offset + attr_entry;
    auto features = Features(index, data_offset);
    uint64_t bitmap[4] = {};
    for (const auto& [bit, payload] : features) bitmap[bit / 64] |= 1ull << (bit % 64);
    std::vector<uint8_t> out;
    ByteWriter w(out);
    w.Bytes(std::string_view(kMagic, 8));
    w.U64(kFileHeaderSize);
    w.U64(attr_entry);
    w.U64(attrs_offset);
    w.U64(attr_entry);
    w.U64(data_offset);
    w.U64(data_size);
    w.Zeros(kSectionSize);  // event_types
    for (uint64_t word : bitmap) w.U64(word);
    w.U64(kExportId);
    w.Bytes(Attr());
    w.U64(ids_offset);
    w.U64(8);
    std::vector<Part> parts;
    parts.push_back(Part{.bytes = std::move(out)});
    for (Part& part : data_parts) parts.push_back(std::move(part));
    std::vector<uint8_t> tail;
    ByteWriter t(tail);
    uint64_t payload_at = data_offset + data_size + kSectionSize * features.size();
    for (const auto& [bit, payload] : features) {
      t.U64(payload_at);
      t.U64(payload.size());
      payload_at += payload.size();
    }
    for (const auto& [bit, payload] : features) t.Bytes(payload);
    parts.push_back(Part{.bytes = std::move(tail)});
    return parts;
  }

  const Archive& a_;
  bool per_cpu_ = false, snapshot_ = false, timed_ = false;
  uint64_t config_ = 0, pmu_type_ = kDefaultPmuType, max_time_ = 0;
  int have_switch_ = 0;
  TimeConv tc_;
  std::vector<uint8_t> sideband_;
};

}  // namespace

Result<std::vector<uint8_t>> ExportPerfDataToBytes(const Archive& archive) {
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<Part> parts, Exporter(archive).Run());
  std::vector<uint8_t> out;
  PTSCOPE_TRY(EmitParts(archive, parts, [&](std::span<const uint8_t> bytes) -> Status {
    out.insert(out.end(), bytes.begin(), bytes.end());
    return Ok();
  }));
  return out;
}

Status ExportPerfData(const Archive& archive, const std::string& out_path) {
  PTSCOPE_ASSIGN_OR_RETURN(std::vector<Part> parts, Exporter(archive).Run());
  // A temporary file beside out_path, renamed over it only when complete: a failed export
  // (ENOSPC, EIO, an unreadable PT chunk) never leaves a perf.data that looks usable.
  PTSCOPE_ASSIGN_OR_RETURN(OutputFile out, OutputFile::CreateReplacing(out_path, 0600));
  PTSCOPE_TRY(EmitParts(archive, parts, [&](std::span<const uint8_t> bytes) -> Status {
    return out.Write(bytes.data(), bytes.size());
  }));
  return out.Commit();
}

}  // namespace ptscope::format
