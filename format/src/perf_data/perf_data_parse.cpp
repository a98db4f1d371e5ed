// Validating parser for file-mode perf.data (see format/PERF_DATA.md). Every read goes through
// ByteReader or an explicit bounds check; every error names the file and the offset. The file is
// read through a ByteSource, a piece at a time: the header, attrs and features we use whole, the
// data section through a window that skips the AUXTRACE trace bytes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "../byte_io.h"
#include "ptscope/file_read.h"
#include "perf_data_parse.h"
#include "ptscope/perf_records.h"

namespace ptscope::format::perf_data {
namespace {

struct Section {
  uint64_t offset = 0, size = 0;
};

class FileSource : public ByteSource {
 public:
  FileSource(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  uint64_t size() const override { return size_; }
  const std::string& name() const override { return path_; }
  Status Read(uint64_t offset, size_t n, uint8_t* out) const override {
    const FileRead read = ReadFileAt(fd_, offset, n, out);
    const std::string where = path_ + ": offset " + std::to_string(offset + read.bytes) + ": ";
    if (read.error != 0) {
      return MakeError(Errc::kIo, where + "read failed: " + std::strerror(read.error));
    }
    if (read.bytes < n) {
      return MakeError(Errc::kTruncated,
                       where + "the file ends there, " + std::to_string(n - read.bytes) +
                           " bytes short; it changed while it was read (re-run on a copy that "
                           "is not being written)");
    }
    return Ok();
  }

 private:
  int fd_;
  uint64_t size_;
  std::string path_;
};

class BufferSource : public ByteSource {
 public:
  BufferSource(std::vector<uint8_t> bytes, std::string name)
      : bytes_(std::move(bytes)), name_(std::move(name)) {}
  uint64_t size() const override { return bytes_.size(); }
  const std::string& name() const override { return name_; }
  Status Read(uint64_t offset, size_t n, uint8_t* out) const override {
    if (offset > bytes_.size() || n > bytes_.size() - offset) {
      return MakeError(Errc::kTruncated, name_ + ": offset " + std::to_string(offset) + ": " +
                                             std::to_string(n) + " bytes past the end");
    }
    if (n != 0) std::memcpy(out, bytes_.data() + offset, n);
    return Ok();
  }

 private:
  std::vector<uint8_t> bytes_;
  std::string name_;
};

// Feature sections we read and attr id arrays are a few KiB (strings, build ids, one id per CPU
// and event); a bound keeps a damaged size within a large file from allocating gigabytes.
constexpr uint64_t kMaxFeatureBytes = 64u << 20;
// The data section's read window: larger than any record (64 KiB), and reads of this size make
// a sideband of millions of records cost few system calls.
constexpr size_t kDataWindowBytes = 1u << 20;

class Parser {
 public:
  Parser(const ByteSource& source, const std::string& name, const ParseOptions& options)
      : source_(source), file_size_(source.size()), name_(name), options_(options) {}

  Result<ParsedPerfData> Run() {
    PTSCOPE_TRY(ReadHeader());
    PTSCOPE_TRY(ReadAttrs());
    PTSCOPE_TRY(ReadFeatures());
    PTSCOPE_TRY(ReadData());
    if (!out_.have_info && !out_.damage.empty() && out_.damage.back().offset >= data_.offset &&
        out_.damage.back().offset < data_end_) {
      const Damage& cut = out_.damage.back();
      return MakeError(cut.code, name_ + ": " + cut.reason +
                                     "; no Intel PT data before it (no AUXTRACE_INFO record)");
    }
    if (!out_.have_info) {
      return Fail(Errc::kUnsupported, data_.offset,
                  "no Intel PT data in this perf.data (no AUXTRACE_INFO record in the data "
                  "section); record with 'perf record -e intel_pt//u'");
    }
    return std::move(out_);
  }

 private:
  Error Fail(Errc code, uint64_t offset, const std::string& what) const {
    return MakeError(code, name_ + ": offset " + std::to_string(offset) + ": " + what);
  }
  // What perf script does with a damaged or cut file: use what is complete, say where it stopped.
  // [offset, end) was not read (or, for a feature, not used).
  // `reason` starts with the offset ("offset N: ..."), not the file name.
  void Damaged(Errc code, uint64_t offset, uint64_t end, std::string reason) {
    out_.damage.push_back(
        Damage{offset, std::max(offset, end), records_read_, code, std::move(reason)});
  }
  static std::string At(uint64_t offset, const std::string& what) {
    return "offset " + std::to_string(offset) + ": " + what;
  }
  // An error's message without the leading "<name>: ".
  std::string Unnamed(const Error& error) const {
    return error.message.rfind(name_ + ": ", 0) == 0 ? error.message.substr(name_.size() + 2)
                                                     : error.message;
  }
  // Bytes [offset, offset + size) of the file, which the caller checked are inside it (Fits).
  Result<std::vector<uint8_t>> Load(uint64_t offset, uint64_t size) const {
    std::vector<uint8_t> out(static_cast<size_t>(size));
    PTSCOPE_TRY(source_.Read(offset, out.size(), out.data()));
    return out;
  }
  bool Fits(uint64_t offset, uint64_t size) const {
    return offset <= file_size_ && size <= file_size_ - offset;
  }
  // `n` bytes of the data section at `offset` (inside it: checked by the caller), valid until
  // the next call.
  Result<std::span<const uint8_t>> DataAt(uint64_t offset, size_t n) {
    if (offset < window_offset_ || offset - window_offset_ > window_.size() ||
        n > window_.size() - (offset - window_offset_)) {
      window_.resize(static_cast<size_t>(std::min<uint64_t>(std::max(n, kDataWindowBytes), data_end_ - offset)));
      window_offset_ = offset;
      PTSCOPE_TRY(source_.Read(offset, window_.size(), window_.data()));
    }
    return std::span<const uint8_t>(window_.data() + (offset - window_offset_), n);
  }
  Status CheckSection(const char* what, uint64_t field_offset, const Section& s) const {
    if (Fits(s.offset, s.size)) return Ok();
    return Fail(Errc::kTruncated, field_offset,
                std::string("the ") + what + " section [" + std::to_string(s.offset) + ", +" +
                    std::to_string(s.size) + ") runs past the end of the file (" +
                    std::to_string(file_size_) + " bytes); the file is truncated");
  }

  Status ReadHeader() {
    if (file_size_ < kPipeHeaderSize) {
      return Fail(Errc::kTruncated, 0,
                  "file is " + std::to_string(file_size_) +
                      " bytes, too short for a perf.data header");
    }
    PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> header,
                             Load(0, std::min<uint64_t>(file_size_, kFileHeaderSize)));
    const char* magic = reinterpret_cast<const char*>(header.data());
    if (std::memcmp(magic, kMagicSwapped, 8) == 0) {
      return Fail(Errc::kUnsupportedVersion, 0,
                  "big-endian perf.data (magic '2ELIFREP') is not supported; convert it on a "
                  "big-endian host with 'perf inject'");
    }
    if (std::memcmp(magic, kMagicV1, 8) == 0) {
      return Fail(Errc::kUnsupportedVersion, 0,
                  "version 1 perf.data (magic 'PERFFILE') is not supported; re-record with a "
                  "current perf");
    }
    if (std::memcmp(magic, kMagic, 8) != 0) {
      return Fail(Errc::kBadMagic, 0, "not a perf.data file (magic is not 'PERFILE2')");
    }
    uint64_t header_size = LoadLe(header.data() + 8, 8);
    if (header_size == kPipeHeaderSize) {
      return Fail(Errc::kUnsupported, 8,
                  "pipe-mode perf.data (header size 16) is not supported; record to a file "
                  "with 'perf record -o FILE' instead of a pipe");
    }
    if (header_size != kFileHeaderSize) {
      return Fail(Errc::kCorrupt, 8,
                  "header size " + std::to_string(header_size) + " is not 104");
    }
    if (file_size_ < kFileHeaderSize) {
      return Fail(Errc::kTruncated, file_size_,
                  "file is " + std::to_string(file_size_) +
                      " bytes, shorter than the 104-byte perf.data header; the file is truncated");
    }
    ByteReader r(header);
    r.Skip("magic", 16);
    attr_size_ = r.U64("attr_size");
    attrs_ = {r.U64("attrs.offset"), r.U64("attrs.size")};
    data_ = {r.U64("data.offset"), r.U64("data.size")};
    r.Skip("event_types", kSectionSize);
    for (uint64_t& word : features_) word = r.U64("features");
    if (attr_size_ < kAttrSizeMin + kSectionSize || attr_size_ > kAttrSizeMax + kSectionSize) {
      return Fail(Errc::kCorrupt, 16, "attr_size " + std::to_string(attr_size_) +
                                          " is outside [80, 4112]");
    }
    PTSCOPE_TRY(CheckSection("attrs", 24, attrs_));
    if (data_.offset > file_size_) PTSCOPE_TRY(CheckSection("data", 40, data_));
    data_end_ = data_.offset + data_.size;
    if (data_.size == 0) {
      // perf record writes the sizes when it finishes: killed, it leaves 0 (and no features).
      data_end_ = file_size_;
      read_features_ = false;
      Damaged(Errc::kTruncated, data_.offset, data_end_, At(data_.offset,
              "the header's data size is 0: perf record did not finish writing this file; its "
              "records are read up to the end of the file, without the header features (build "
              "ids, host, CPU)"));
    } else if (!Fits(data_.offset, data_.size)) {
      // Cut: the records are read up to the cut (ReadData says where it stopped).
      data_end_ = file_size_;
      read_features_ = false;
      data_cut_ = true;
    }
    return Ok();
  }

  Status ReadAttrs() {
    if (attrs_.size == 0 || attrs_.size % attr_size_ != 0) {
      return Fail(Errc::kCorrupt, 32, "attrs section size " + std::to_string(attrs_.size) +
                                          " is not a nonzero multiple of attr_size " +
                                          std::to_string(attr_size_));
    }
    uint64_t ids_total = 0;
    for (uint64_t at = attrs_.offset; at < attrs_.offset + attrs_.size; at += attr_size_) {
      PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> stored_attr, Load(at, attr_size_));
      ByteReader r(stored_attr);
      ParsedAttr attr;
      attr.file_offset = at;
      attr.type = r.U32("type");
      uint32_t size = r.U32("size");
      attr.config = r.U64("config");
      r.U64("sample_period");
      attr.sample_type = r.U64("sample_type");
      attr.read_format = r.U64("read_format");
      attr.flags = r.U64("flags");
      uint64_t stored = attr_size_ - kSectionSize;
      if (size < kAttrSizeMin || size > stored) size = static_cast<uint32_t>(stored);
      attr.raw.assign(stored_attr.begin(), stored_attr.begin() + size);
      ByteReader ids_ref(std::span<const uint8_t>(stored_attr).subspan(stored, kSectionSize));
      Section ids{ids_ref.U64("ids.offset"), ids_ref.U64("ids.size")};
      PTSCOPE_TRY(CheckSection("attr ids", at + stored, ids));
      if (ids.size > kMaxFeatureBytes) {
        return Fail(Errc::kCorrupt, at + stored, "attr ids section of " + std::to_string(ids.size) +
                                                     " bytes is larger than any perf writes");
      }
      // perf writes each attr's ids apart, so together they fit in the file: a file whose attrs
      // all name one large table would otherwise load it once per attr (400 attrs sharing 4 MB
      // made 3.3 GB).
      ids_total += ids.size;
      if (ids_total > file_size_) {
        return Fail(Errc::kCorrupt, at + stored,
                    "the attrs' ids sections add up to " + std::to_string(ids_total) +
                        " bytes, more than the file's " + std::to_string(file_size_) +
                        ": they overlap, which perf never writes (the file is damaged)");
      }
      PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> id_bytes, Load(ids.offset, ids.size));
      ByteReader id_reader(id_bytes);
      for (uint64_t i = 0; i < ids.size / 8; ++i) attr.ids.push_back(id_reader.U64("id"));
      out_.attrs.push_back(std::move(attr));
    }
    return CheckTrailers();
  }

  // perf itself refuses files whose attrs disagree on the sample_id trailer; so do we, because
  // the sideband is copied verbatim and read with one layout.
  Status CheckTrailers() {
    const ParsedAttr& first = out_.attrs.front();
    out_.sample_id_all = (first.flags & kAttrSampleIdAll) != 0;
    out_.trailer_sample_type = first.sample_type & kTrailerBits;
    for (const ParsedAttr& attr : out_.attrs) {
      bool all = (attr.flags & kAttrSampleIdAll) != 0;
      if (all != out_.sample_id_all || (attr.sample_type & kTrailerBits) != out_.trailer_sample_type) {
        return Fail(Errc::kUnsupported, attr.file_offset,
                    "attrs disagree on the sample_id layout (sample_type/sample_id_all); "
                    "re-record with one tracking event");
      }
    }
    out_.trailer = MakeTrailerLayout(out_.trailer_sample_type, out_.sample_id_all);
    return Ok();
  }

  // Feature sections: a table of perf_file_section right after the data section, one per set
  // bit in bit order. Unknown features are skipped.
  // A feature that cannot be read is left out, as perf leaves it out: the trace does not depend
  // on it (build ids then come from the MMAP2 records only).
  Status ReadFeatures() {
    if (!read_features_) return Ok();
    uint64_t table = data_end_;
    for (int bit = 0; bit < kFeatureBits; ++bit) {
      if (!(features_[bit / 64] >> (bit % 64) & 1)) continue;
      if (!Fits(table, kSectionSize)) {
        Damaged(Errc::kTruncated, table, file_size_,
                At(table, "the feature section table runs past the end of the file at feature " +
                              std::to_string(bit) + ": the file is truncated; the features from "
                              "there on are left out"));
        return Ok();
      }
      PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> entry, Load(table, kSectionSize));
      Section s{LoadLe(entry.data(), 8), LoadLe(entry.data() + 8, 8)};
      if (Status in_file = CheckSection(("feature " + std::to_string(bit)).c_str(), table, s);
          !in_file) {
        Damaged(Errc::kTruncated, table, table + kSectionSize,
                Unnamed(in_file.error()) + "; feature " + std::to_string(bit) + " is left out");
      } else if (Status read = ReadFeature(bit, s); !read) {
        if (read.error().code == Errc::kIo) return read;
        Damaged(read.error().code, s.offset, s.offset + s.size,
                Unnamed(read.error()) + "; feature " + std::to_string(bit) + " is left out");
      }
      table += kSectionSize;
    }
    return Ok();
  }

  Result<std::string> HeaderString(ByteReader& r, uint64_t base, const char* what) {
    uint32_t len = r.U32(what);
    auto view = r.Bytes(what, len);
    if (!r.ok()) return Fail(Errc::kCorrupt, base + r.failed_offset(), r.FailureText());
    std::string s(view.begin(), view.end());
    return s.substr(0, s.find('\0'));
  }

  Status ReadFeature(int bit, const Section& s) {
    switch (bit) {
      case kFeatBuildId: case kFeatHostname: case kFeatOsRelease: case kFeatVersion:
      case kFeatCpuid: case kFeatCmdline: break;
      default: return Ok();  // not needed for import; skipped
    }
    if (s.size > kMaxFeatureBytes) {
      return Fail(Errc::kCorrupt, s.offset, "feature " + std::to_string(bit) + " section of " +
                                                std::to_string(s.size) +
                                                " bytes is larger than any perf writes");
    }
    PTSCOPE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Load(s.offset, s.size));
    ByteReader r(bytes);
    switch (bit) {
      case kFeatBuildId: return ReadBuildIds(s, bytes);
      case kFeatHostname: { PTSCOPE_ASSIGN_OR_RETURN(out_.hostname, HeaderString(r, s.offset, "hostname")); return Ok(); }
      case kFeatOsRelease: { PTSCOPE_ASSIGN_OR_RETURN(out_.os_release, HeaderString(r, s.offset, "osrelease")); return Ok(); }
      case kFeatVersion: { PTSCOPE_ASSIGN_OR_RETURN(out_.perf_version, HeaderString(r, s.offset, "version")); return Ok(); }
      case kFeatCpuid: { PTSCOPE_ASSIGN_OR_RETURN(out_.cpuid, HeaderString(r, s.offset, "cpuid")); return Ok(); }
      case kFeatCmdline: {
        uint32_t n = r.U32("cmdline.nr");
        for (uint32_t i = 0; i < n && r.ok(); ++i) {
          PTSCOPE_ASSIGN_OR_RETURN(std::string arg, HeaderString(r, s.offset, "cmdline"));
          if (!out_.cmdline.empty()) out_.cmdline += ' ';
          out_.cmdline += arg;
        }
        return Ok();
      }
      default: return Ok();
    }
  }

  // build_id_event: header, pid, build_id[24] (data[20], size, pad), filename (NUL-padded).
  Status ReadBuildIds(const Section& s, const std::vector<uint8_t>& section) {
    // `at` is a file offset (for messages); `entry` points at its byte, section[at - s.offset].
    uint64_t at = s.offset, end = s.offset + s.size;
    while (at < end) {
      if (end - at < 36) return Fail(Errc::kCorrupt, at, "build id entry shorter than 36 bytes");
      const uint8_t* entry = section.data() + (at - s.offset);
      uint16_t misc = static_cast<uint16_t>(LoadLe(entry + 4, 2));
      uint16_t size = static_cast<uint16_t>(LoadLe(entry + 6, 2));
      if (size < 36 || size > end - at) {
        return Fail(Errc::kCorrupt, at, "build id entry size " + std::to_string(size) +
                                            " does not fit the BUILD_ID feature section");
      }
      const uint8_t* id = entry + 12;
      size_t id_len = (misc & kMiscBuildIdSize) ? std::min<size_t>(id[20], 20) : 20;
      std::string filename(reinterpret_cast<const char*>(entry + 36), size - 36);
      filename = filename.substr(0, filename.find('\0'));
      out_.build_ids[filename] = std::vector<uint8_t>(id, id + id_len);
      at += size;
    }
    return Ok();
  }

  // Records up to the end of the data section, or up to the first that is cut off or damaged:
  // perf.data has no sync points to find the next record by, so reading stops there (as perf
  // script stops), and what was read before is used.
  Status ReadData() {
    uint64_t at = data_.offset;
    const uint64_t end = data_end_;
    while (at < end) {
      if (end - at < 8) {
        Damaged(Errc::kTruncated, at, end,
                At(at, "record header cut off by the end of the data: the file is truncated"));
        return Ok();
      }
      PTSCOPE_ASSIGN_OR_RETURN(std::span<const uint8_t> head, DataAt(at, 8));
      uint32_t type = static_cast<uint32_t>(LoadLe(head.data(), 4));
      uint16_t size = static_cast<uint16_t>(LoadLe(head.data() + 6, 2));
      if (size < 8) {
        Damaged(Errc::kCorrupt, at, end,
                At(at, "record type " + std::to_string(type) + " has size " +
                           std::to_string(size) + " < 8: the records after it cannot be found"));
        return Ok();
      }
      if (size > end - at) {
        Damaged(Errc::kTruncated, at, end,
                At(at, "record type " + std::to_string(type) + " of " + std::to_string(size) +
                           " bytes runs past the end of the data: the file is truncated"));
        return Ok();
      }
      uint64_t extra = 0;
      PTSCOPE_ASSIGN_OR_RETURN(std::span<const uint8_t> rec, DataAt(at, size));
      const size_t damage_before = out_.damage.size();
      PTSCOPE_TRY(OnRecord(at, type, rec, end, &extra));
      if (out_.damage.size() != damage_before) return Ok();  // the record was cut: stop there
      ++records_read_;
      at += size + extra;
    }
    if (data_cut_) {  // cut right after a whole record
      Damaged(Errc::kTruncated, file_size_, data_.offset + data_.size,
              At(40, "the data section [" + std::to_string(data_.offset) + ", +" +
                         std::to_string(data_.size) + ") runs past the end of the file (" +
                         std::to_string(file_size_) + " bytes): the file is truncated after a "
                         "whole record; the header features (build ids, host, CPU) are missing"));
    }
    return Ok();
  }

  Status OnRecord(uint64_t at, uint32_t type, std::span<const uint8_t> rec, uint64_t end,
                  uint64_t* extra) {
    if (type == perf::kRecordSample) {
      ++out_.samples_skipped;
    } else if (type < kUserRecordStart) {
      OnKernelRecord(at, type, rec);
    } else if (type == kRecordAuxtraceInfo) {
      return OnAuxtraceInfo(at, rec);
    } else if (type == kRecordAuxtrace) {
      return OnAuxtrace(at, rec, end, extra);
    } else if (type == kRecordTimeConv) {
      ByteReader r(rec.subspan(8));
      out_.tc_shift = r.U64("time_shift");
      out_.tc_mult = r.U64("time_mult");
      out_.tc_zero = r.U64("time_zero");
      if (!r.ok()) return Fail(Errc::kCorrupt, at, "TIME_CONV record: " + r.FailureText());
      out_.have_time_conv = true;
      out_.tc_offset = at;
      if (rec.size() >= 56) out_.tc_cap_user_time_zero = rec[48] != 0;
    } else if (type == kRecordCompressed) {
      return Fail(Errc::kUnsupported, at,
                  "compressed perf.data (perf record -z) is not supported; decompress it with "
                  "'perf inject -i FILE -o NEW' or re-record without -z");
    }
    return Ok();  // other perf-tool records (FINISHED_ROUND, ID_INDEX, ...) carry nothing we need
  }

  void OnKernelRecord(uint64_t at, uint32_t type, std::span<const uint8_t> rec) {
    auto& ranges = out_.sideband_ranges;
    if (ranges.empty() || ranges.back().bytes + rec.size() > kSidebandRangeBytes) {
      ranges.push_back(Archive::SidebandRange{.begin = at});
    }
    Archive::SidebandRange& range = ranges.back();
    range.end = at + rec.size();
    range.bytes += rec.size();
    ++range.records;
    const bool is_switch = type == perf::kRecordSwitch || type == perf::kRecordSwitchCpuWide;
    if (is_switch && !options_.keep_switch_records) return;
    out_.sideband.push_back({at, out_.records->Add(rec)});
  }

  Status OnAuxtraceInfo(uint64_t at, std::span<const uint8_t> rec) {
    ByteReader r(rec.subspan(8));
    uint32_t type = r.U32("type");
    r.U32("reserved");
    if (!r.ok()) return Fail(Errc::kCorrupt, at, "AUXTRACE_INFO record: " + r.FailureText());
    if (type != kAuxtraceIntelPt) {
      return Fail(Errc::kUnsupported, at, "AUXTRACE_INFO type " + std::to_string(type) +
                                              " is not Intel PT (1); only intel_pt captures "
                                              "can be imported");
    }
    size_t n = std::min<size_t>(r.remaining() / 8, kPrivCount);
    if (n <= kPrivPerCpuMmaps) {
      return Fail(Errc::kCorrupt, at, "AUXTRACE_INFO holds " + std::to_string(n) +
                                          " priv entries, fewer than perf's minimum of 10");
    }
    out_.priv.resize(n);
    for (size_t i = 0; i < n; ++i) out_.priv[i] = r.U64("priv");
    if (n == kPrivCount && out_.priv[kPrivFilterStrLen] != 0) {
      uint64_t len = out_.priv[kPrivFilterStrLen];
      auto text = r.Bytes("filter", len);
      if (!r.ok()) return Fail(Errc::kCorrupt, at, "AUXTRACE_INFO filter string: " + r.FailureText());
      out_.filter.assign(text.begin(), text.end());
    }
    out_.have_info = true;
    out_.info_offset = at;
    return Ok();
  }

  Status OnAuxtrace(uint64_t at, std::span<const uint8_t> rec, uint64_t end, uint64_t* extra) {
    ByteReader r(rec.subspan(8));
    uint64_t size = r.U64("size");
    ParsedAuxtrace aux;
    aux.file_offset = at;
    aux.offset = r.U64("offset");
    aux.reference = r.U64("reference");
    aux.idx = r.U32("idx");
    aux.tid = r.U32("tid");
    aux.cpu = r.U32("cpu");
    if (!r.ok()) return Fail(Errc::kCorrupt, at, "AUXTRACE record: " + r.FailureText());
    uint64_t data_at = at + rec.size();
    aux.data_offset = data_at;
    aux.size = size;
    if (size > end - data_at) {
      // The trace bytes that are there are a prefix of the stream: kept, and marked cut.
      aux.size = end - data_at;
      aux.cut = true;
      Damaged(Errc::kTruncated, at, end,
              At(at, "AUXTRACE record announces " + std::to_string(size) + " bytes of trace but "
                     "the data ends after " + std::to_string(end - data_at) +
                     ": the file is truncated (the trace up to the cut is decoded)"));
    }
    if (aux.size != 0) out_.auxtrace.push_back(aux);
    *extra = aux.size;
    return Ok();
  }

  const ByteSource& source_;
  const uint64_t file_size_;
  const std::string& name_;
  const ParseOptions& options_;
  std::vector<uint8_t> window_;  // data section bytes from window_offset_ on (see DataAt)
  uint64_t window_offset_ = 0;
  uint64_t attr_size_ = 0;
  Section attrs_, data_;
  uint64_t data_end_ = 0;         // where the records end: the data section's end, or the file's
  bool read_features_ = true;     // false when the data section's end is not known
  bool data_cut_ = false;         // the file ends before the data section does
  uint64_t records_read_ = 0;
  uint64_t features_[4] = {};
  ParsedPerfData out_;
};

}  // namespace

std::span<const uint8_t> RecordArena::Add(std::span<const uint8_t> bytes) {
  if (bytes.size() > kBlockBytes - used_) {
    blocks_.push_back(std::make_unique_for_overwrite<uint8_t[]>(std::max(kBlockBytes, bytes.size())));
    used_ = 0;
  }
  uint8_t* at = blocks_.back().get() + used_;
  if (!bytes.empty()) std::memcpy(at, bytes.data(), bytes.size());
  used_ += bytes.size();
  return std::span<const uint8_t>(at, bytes.size());
}

Result<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return MakeError(err == ENOENT ? Errc::kNotFound : (err == EACCES ? Errc::kPermission : Errc::kIo),
                     path + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return MakeError(Errc::kIo, path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return MakeError(Errc::kUnsupported,
                     path + ": not a regular file; perf.data is read in place (copy it to a file "
                            "first)");
  }
  return std::unique_ptr<ByteSource>(new FileSource(fd, static_cast<uint64_t>(st.st_size), path));
}

std::unique_ptr<ByteSource> MakeBufferSource(std::vector<uint8_t> bytes, std::string name) {
  return std::make_unique<BufferSource>(std::move(bytes), std::move(name));
}

Result<ParsedPerfData> ParsePerfData(const ByteSource& source, const std::string& name,
                                     const ParseOptions& options) {
  return Parser(source, name, options).Run();
}

Result<std::vector<uint8_t>> ReadSidebandRange(const ByteSource& source,
                                               const Archive::SidebandRange& range) {
  // Read in windows (the records between the kernel ones may be megabytes of trace, skipped).
  constexpr uint64_t kWindowBytes = 256u << 10;
  std::vector<uint8_t> out, window;
  out.reserve(static_cast<size_t>(std::min<uint64_t>(range.bytes, kSidebandRangeBytes)));
  uint64_t window_at = 0, records = 0;
  auto changed = [&](uint64_t at, const std::string& what) {
    return MakeError(Errc::kCorrupt, source.name() + ": offset " + std::to_string(at) + ": " +
                                         what + ", not the sideband records read there before; "
                                         "the file changed since it was read");
  };
  auto bytes_at = [&](uint64_t at, uint64_t n) -> Result<const uint8_t*> {
    if (window.empty() || at < window_at || at + n > window_at + window.size()) {
      if (at + n > range.end) return changed(at, "a record runs past the end of the range");
      window.resize(static_cast<size_t>(std::max(n, std::min(kWindowBytes, range.end - at))));
      window_at = at;
      PTSCOPE_TRY(source.Read(at, window.size(), window.data()));
    }
    return window.data() + (at - window_at);
  };
  for (uint64_t at = range.begin; at < range.end;) {
    PTSCOPE_ASSIGN_OR_RETURN(const uint8_t* head, bytes_at(at, 8));
    const uint32_t type = static_cast<uint32_t>(LoadLe(head, 4));
    const uint16_t size = static_cast<uint16_t>(LoadLe(head + 6, 2));
    if (size < 8) return changed(at, "a record of size " + std::to_string(size));
    PTSCOPE_ASSIGN_OR_RETURN(const uint8_t* rec, bytes_at(at, size));
    uint64_t next = at + size;
    if (type == kRecordAuxtrace) {
      if (size < 16) return changed(at, "an AUXTRACE record of size " + std::to_string(size));
      const uint64_t trace = LoadLe(rec + 8, 8);  // its trace bytes follow it
      if (trace > range.end - std::min(next, range.end)) {
        return changed(at, "an AUXTRACE record's trace runs past the end of the range");
      }
      next += trace;
    } else if (type < kUserRecordStart && type != perf::kRecordSample) {
      if (size > range.bytes - out.size()) {
        return changed(at, "more than the range's " + std::to_string(range.bytes) +
                               " bytes of records");
      }
      out.insert(out.end(), rec, rec + size);
      ++records;
    }
    if (next > range.end) return changed(at, "a record runs past the end of the range");
    at = next;
  }
  if (records != range.records || out.size() != range.bytes) {
    return changed(range.begin, std::to_string(records) + " records of " +
                                    std::to_string(out.size()) + " bytes in the range");
  }
  return out;
}

}  // namespace ptscope::format::perf_data
