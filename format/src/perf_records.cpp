// perf_event records: layouts from include/uapi/linux/perf_event.h, read field by field through
// ByteReader and written through ByteWriter (never by copying structs).
//
// Non-sample kernel records end with the sample_id trailer when attr.sample_id_all is set; like
// perf, we locate it from the END of the record (size - trailer size), which also delimits the
// NUL-padded strings of MMAP/MMAP2/COMM.
#include "ptscope/perf_records.h"

#include <algorithm>
#include <cstring>

#include "byte_io.h"

namespace ptscope::perf {
namespace {

using format::ByteReader;
using format::ByteWriter;

constexpr uint16_t kMiscSwitchOutPreempt = 0x4000;
constexpr uint32_t kUserTypeStart = 64;  // PERF_RECORD_USER_TYPE_START: perf tool records
constexpr size_t kHeaderSize = 8;
constexpr size_t kMmap2BuildIdMax = 20;

const char* TypeName(uint32_t type) {
  static constexpr const char* kNames[] = {
      "UNKNOWN", "MMAP", "LOST", "COMM", "EXIT", "THROTTLE", "UNTHROTTLE", "FORK", "READ",
      "SAMPLE", "MMAP2", "AUX", "ITRACE_START", "LOST_SAMPLES", "SWITCH", "SWITCH_CPU_WIDE",
      "NAMESPACES", "KSYMBOL", "BPF_EVENT", "CGROUP", "TEXT_POKE", "AUX_OUTPUT_HW_ID"};
  return type < std::size(kNames) ? kNames[type] : "UNKNOWN";
}

// Kernel records other than SAMPLE carry the trailer; perf's own (user) records never do.
bool HasTrailer(uint32_t type, const RecordLayout& layout) {
  return layout.sample_id_all && type != kRecordSample && type < kUserTypeStart;
}

size_t TrailerSize(uint64_t sample_type) {
  size_t n = 0;
  if (sample_type & kSampleTid) n += 8;
  if (sample_type & kSampleTime) n += 8;
  if (sample_type & kSampleId) n += 8;
  if (sample_type & kSampleStreamId) n += 8;
  if (sample_type & kSampleCpu) n += 8;
  if (sample_type & kSampleIdentifier) n += 8;
  return n;
}

SampleId ParseTrailer(ByteReader& r, uint64_t sample_type) {
  SampleId s;
  if (sample_type & kSampleTid) {
    s.pid = r.U32("sample_id.pid");
    s.tid = r.U32("sample_id.tid");
  }
  if (sample_type & kSampleTime) s.time = r.U64("sample_id.time");
  if (sample_type & kSampleId) s.id = r.U64("sample_id.id");
  if (sample_type & kSampleStreamId) s.stream_id = r.U64("sample_id.stream_id");
  if (sample_type & kSampleCpu) {
    s.cpu = r.U32("sample_id.cpu");
    r.U32("sample_id.res");
  }
  if (sample_type & kSampleIdentifier) s.id = r.U64("sample_id.identifier");
  return s;
}

void BuildTrailer(ByteWriter& w, const SampleId& s, uint64_t sample_type) {
  if (sample_type & kSampleTid) {
    w.U32(s.pid);
    w.U32(s.tid);
  }
  if (sample_type & kSampleTime) w.U64(s.time);
  if (sample_type & kSampleId) w.U64(s.id);
  if (sample_type & kSampleStreamId) w.U64(s.stream_id);
  if (sample_type & kSampleCpu) {
    w.U32(s.cpu);
    w.U32(0);
  }
  if (sample_type & kSampleIdentifier) w.U64(s.id);
}

// The NUL-terminated string filling the rest of the body (its padding follows the NUL).
bool ReadPaddedString(ByteReader& r, const char* field, std::string* out) {
  std::span<const uint8_t> rest = r.Bytes(field, r.remaining());
  auto nul = std::find(rest.begin(), rest.end(), uint8_t{0});
  if (nul == rest.end()) return false;
  out->assign(rest.begin(), nul);
  return true;
}

void WritePaddedString(ByteWriter& w, const std::string& s) {
  w.Bytes(std::string_view(s.data(), strnlen(s.data(), s.size())));  // stop at an embedded NUL
  w.U8(0);
  w.PadTo(8);
}

Result<RecordBody> ParseMmap(ByteReader& r, uint32_t type, uint16_t misc) {
  MmapRecord m;
  m.is_mmap2 = type == kRecordMmap2;
  m.pid = r.U32("pid");
  m.tid = r.U32("tid");
  m.addr = r.U64("addr");
  m.len = r.U64("len");
  m.pgoff = r.U64("pgoff");
  if (m.is_mmap2) {
    if (misc & kMiscMmapBuildId) {
      uint8_t size = r.U8("build_id_size");
      r.U8("reserved_1");
      r.U16("reserved_2");
      std::span<const uint8_t> id = r.Bytes("build_id", kMmap2BuildIdMax);
      if (r.ok() && size > kMmap2BuildIdMax) {
        return MakeError(Errc::kCorrupt, "field 'build_id_size' = " + std::to_string(size) +
                                             " exceeds 20");
      }
      if (r.ok()) m.build_id.assign(id.begin(), id.begin() + size);
    } else {
      m.maj = r.U32("maj");
      m.min = r.U32("min");
      m.ino = r.U64("ino");
      m.ino_generation = r.U64("ino_generation");
    }
    m.prot = r.U32("prot");
    m.flags = r.U32("flags");
  }
  if (r.ok() && !ReadPaddedString(r, "filename", &m.filename)) {
    return MakeError(Errc::kCorrupt, "field 'filename' is not NUL-terminated");
  }
  return RecordBody(std::move(m));
}

Result<RecordBody> ParseBody(ByteReader& r, uint32_t type, uint16_t misc) {
  switch (type) {
    case kRecordMmap:
    case kRecordMmap2:
      return ParseMmap(r, type, misc);
    case kRecordComm: {
      CommRecord c;
      c.pid = r.U32("pid");
      c.tid = r.U32("tid");
      c.exec = (misc & kMiscCommExec) != 0;
      if (r.ok() && !ReadPaddedString(r, "comm", &c.comm)) {
        return MakeError(Errc::kCorrupt, "field 'comm' is not NUL-terminated");
      }
      return RecordBody(std::move(c));
    }
    case kRecordFork:
    case kRecordExit: {
      TaskRecord t;
      t.is_exit = type == kRecordExit;
      t.pid = r.U32("pid");
      t.ppid = r.U32("ppid");
      t.tid = r.U32("tid");
      t.ptid = r.U32("ptid");
      t.time = r.U64("time");
      return RecordBody(t);
    }
    case kRecordLost: {
      LostRecord l;
      l.id = r.U64("id");
      l.lost = r.U64("lost");
      return RecordBody(l);
    }
    case kRecordAux: {
      AuxRecord a;
      a.aux_offset = r.U64("aux_offset");
      a.aux_size = r.U64("aux_size");
      a.flags = r.U64("flags");
      return RecordBody(a);
    }
    case kRecordItraceStart: {
      ItraceStartRecord i;
      i.pid = r.U32("pid");
      i.tid = r.U32("tid");
      return RecordBody(i);
    }
    case kRecordSwitch:
    case kRecordSwitchCpuWide: {
      SwitchRecord s;
      s.out = (misc & kMiscSwitchOut) != 0;
      s.preempt = s.out && (misc & kMiscSwitchOutPreempt) != 0;
      s.cpu_wide = type == kRecordSwitchCpuWide;
      if (s.cpu_wide) {
        s.next_prev_pid = r.U32("next_prev_pid");
        s.next_prev_tid = r.U32("next_prev_tid");
      }
      return RecordBody(s);
    }
    default: {
      std::span<const uint8_t> body = r.Bytes("body", r.remaining());
      return RecordBody(OtherRecord{std::vector<uint8_t>(body.begin(), body.end())});
    }
  }
}

Error RecordError(uint32_t type, const std::string& what) {
  return MakeError(Errc::kCorrupt, std::string(TypeName(type)) + " record (type " +
                                       std::to_string(type) + "): " + what);
}

}  // namespace

Result<Record> ParseRecord(std::span<const uint8_t> bytes, const RecordLayout& layout,
                           uint16_t* size_out) {
  ByteReader header(bytes);
  uint32_t type = header.U32("type");
  uint16_t misc = header.U16("misc");
  uint16_t size = header.U16("size");
  if (!header.ok()) {
    return MakeError(Errc::kTruncated, "perf record header: " + header.FailureText());
  }
  if (size < kHeaderSize) {
    return RecordError(type, "header field 'size' = " + std::to_string(size) +
                                 " is smaller than the 8-byte header");
  }
  if (size > bytes.size()) {
    return MakeError(Errc::kTruncated, std::string(TypeName(type)) + " record (type " +
                                           std::to_string(type) + "): header field 'size' = " +
                                           std::to_string(size) + " but only " +
                                           std::to_string(bytes.size()) + " bytes left");
  }
  if (size_out) *size_out = size;
  std::span<const uint8_t> rest = bytes.subspan(kHeaderSize, size - kHeaderSize);
  Record record;
  record.type = type;
  record.misc = misc;
  if (HasTrailer(type, layout)) {
    size_t trailer = TrailerSize(layout.sample_type);
    if (trailer > rest.size()) {
      return RecordError(type, "size " + std::to_string(size) + " leaves no room for the " +
                                   std::to_string(trailer) + "-byte sample_id");
    }
    ByteReader t(rest.subspan(rest.size() - trailer));
    record.sample_id = ParseTrailer(t, layout.sample_type);
    rest = rest.first(rest.size() - trailer);
  }
  ByteReader r(rest);
  Result<RecordBody> body = ParseBody(r, type, misc);
  if (!body) return RecordError(type, body.error().message);
  if (!r.ok()) return RecordError(type, r.FailureText());
  record.body = std::move(*body);
  return record;
}

std::optional<Result<Record>> RecordIterator::Next() {
  if (failed_ || pos_ >= bytes_.size()) return std::nullopt;
  offset_ = pos_;
  uint16_t size = 0;
  Result<Record> record = ParseRecord(bytes_.subspan(pos_), layout_, &size);
  if (!record) {
    failed_ = true;
    Error e = std::move(record).error();
    e.message = "perf record at offset " + std::to_string(offset_) + ": " + e.message;
    return Result<Record>(std::move(e));
  }
  pos_ += size;
  return record;
}

namespace {

uint32_t TypeFor(const Record& record) {
  return std::visit(
      [&record](const auto& b) -> uint32_t {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, MmapRecord>) return b.is_mmap2 ? kRecordMmap2 : kRecordMmap;
        if constexpr (std::is_same_v<T, CommRecord>) return kRecordComm;
        if constexpr (std::is_same_v<T, TaskRecord>) return b.is_exit ? kRecordExit : kRecordFork;
        if constexpr (std::is_same_v<T, LostRecord>) return kRecordLost;
        if constexpr (std::is_same_v<T, AuxRecord>) return kRecordAux;
        if constexpr (std::is_same_v<T, ItraceStartRecord>) return kRecordItraceStart;
        if constexpr (std::is_same_v<T, SwitchRecord>) {
          return b.cpu_wide ? kRecordSwitchCpuWide : kRecordSwitch;
        }
        return record.type;  // OtherRecord
      },
      record.body);
}

// header.misc with the bits the body decides set or cleared to match it.
uint16_t MiscFor(const Record& record) {
  uint16_t misc = record.misc;
  auto set = [&misc](uint16_t bit, bool on) { misc = on ? (misc | bit) : (misc & ~bit); };
  if (const auto* m = std::get_if<MmapRecord>(&record.body); m && m->is_mmap2) {
    set(kMiscMmapBuildId, !m->build_id.empty());
  } else if (const auto* c = std::get_if<CommRecord>(&record.body)) {
    set(kMiscCommExec, c->exec);
  } else if (const auto* s = std::get_if<SwitchRecord>(&record.body)) {
    set(kMiscSwitchOut, s->out);
    set(kMiscSwitchOutPreempt, s->out && s->preempt);
  }
  return misc;
}

void BuildMmap(ByteWriter& w, const MmapRecord& m) {
  w.U32(m.pid);
  w.U32(m.tid);
  w.U64(m.addr);
  w.U64(m.len);
  w.U64(m.pgoff);
  if (m.is_mmap2) {
    if (!m.build_id.empty()) {
      size_t n = std::min(m.build_id.size(), kMmap2BuildIdMax);
      w.U8(static_cast<uint8_t>(n));
      w.U8(0);
      w.U16(0);
      w.Bytes(std::span<const uint8_t>(m.build_id.data(), n));
      w.Zeros(kMmap2BuildIdMax - n);
    } else {
      w.U32(m.maj);
      w.U32(m.min);
      w.U64(m.ino);
      w.U64(m.ino_generation);
    }
    w.U32(m.prot);
    w.U32(m.flags);
  }
  WritePaddedString(w, m.filename);
}

void BuildBody(ByteWriter& w, const RecordBody& body) {
  std::visit(
      [&w](const auto& b) {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, MmapRecord>) {
          BuildMmap(w, b);
        } else if constexpr (std::is_same_v<T, CommRecord>) {
          w.U32(b.pid);
          w.U32(b.tid);
          WritePaddedString(w, b.comm);
        } else if constexpr (std::is_same_v<T, TaskRecord>) {
          w.U32(b.pid);
          w.U32(b.ppid);
          w.U32(b.tid);
          w.U32(b.ptid);
          w.U64(b.time);
        } else if constexpr (std::is_same_v<T, LostRecord>) {
          w.U64(b.id);
          w.U64(b.lost);
        } else if constexpr (std::is_same_v<T, AuxRecord>) {
          w.U64(b.aux_offset);
          w.U64(b.aux_size);
          w.U64(b.flags);
        } else if constexpr (std::is_same_v<T, ItraceStartRecord>) {
          w.U32(b.pid);
          w.U32(b.tid);
        } else if constexpr (std::is_same_v<T, SwitchRecord>) {
          if (b.cpu_wide) {
            w.U32(b.next_prev_pid);
            w.U32(b.next_prev_tid);
          }
        } else {
          w.Bytes(b.body);
        }
      },
      body);
}

}  // namespace

std::vector<uint8_t> BuildRecord(const Record& record, const RecordLayout& layout) {
  std::vector<uint8_t> out;
  ByteWriter w(out);
  uint32_t type = TypeFor(record);
  w.U32(type);
  w.U16(MiscFor(record));
  w.U16(0);  // size, patched below
  BuildBody(w, record.body);
  if (HasTrailer(type, layout)) BuildTrailer(w, record.sample_id.value_or(SampleId{}), layout.sample_type);
  PTSCOPE_CHECK(out.size() <= 0xFFFF);  // perf records are at most 64 KiB by construction
  format::StoreLe(out.data() + 6, out.size(), 2);
  return out;
}

}  // namespace ptscope::perf
