// jitdump parsing (see jitdump_reader.h). Layout: a header of at least 40 bytes (its own
// total_size says how long), then records, each a 16-byte prefix {id, total_size, timestamp}
// followed by its body; total_size covers the whole record.
#include "jitdump_reader.h"

#include <map>

namespace ptscope::symbols {
namespace {

enum RecordId : uint32_t {
  kCodeLoad = 0,
  kCodeMove = 1,
  kCodeDebugInfo = 2,
  kCodeClose = 3,
  kCodeUnwindingInfo = 4,
};
constexpr size_t kHeaderSize = 40;
constexpr size_t kPrefixSize = 16;

// Bounds-checked reads in the file's byte order over [begin, end) of `data`.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t begin, size_t end, bool swap)
      : data_(data), pos_(begin), end_(end), swap_(swap) {}
  bool U32(uint32_t& out) { return Read(4, out); }
  bool U64(uint64_t& out) { return Read(8, out); }
  bool I32(int32_t& out) {
    uint32_t raw = 0;
    if (!U32(raw)) return false;
    out = static_cast<int32_t>(raw);
    return true;
  }
  // A NUL-terminated string inside the range.
  bool CString(std::string& out) {
    for (size_t i = pos_; i < end_; ++i) {
      if (data_[i] == 0) {
        out.assign(reinterpret_cast<const char*>(data_ + pos_), i - pos_);
        pos_ = i + 1;
        return true;
      }
    }
    return false;
  }
  bool Bytes(uint64_t count, std::vector<uint8_t>& out) {
    if (count > end_ - pos_) return false;
    out.assign(data_ + pos_, data_ + pos_ + count);
    pos_ += count;
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  template <typename T>
  bool Read(size_t width, T& out) {
    if (end_ - pos_ < width) return false;
    uint64_t value = 0;
    for (size_t i = 0; i < width; ++i) {
      size_t byte = swap_ ? width - 1 - i : i;  // little-endian unless swapped
      value |= static_cast<uint64_t>(data_[pos_ + byte]) << (8 * i);
    }
    out = static_cast<T>(value);
    pos_ += width;
    return true;
  }
  const uint8_t* data_;
  size_t pos_, end_;
  bool swap_;
};

std::string At(const std::string& source, size_t offset) {
  return source + ": offset " + std::to_string(offset) + ": ";
}

bool ParseLoad(Cursor& c, JitCodeRecord& record) {
  return c.U32(record.pid) && c.U32(record.tid) && c.U64(record.vma) && c.U64(record.code_addr) &&
         c.U64(record.code_size) && c.U64(record.code_index) && c.CString(record.name) &&
         c.Bytes(record.code_size, record.code);
}

bool ParseMove(Cursor& c, JitCodeRecord& record) {
  record.kind = JitCodeRecord::Kind::kMove;
  return c.U32(record.pid) && c.U32(record.tid) && c.U64(record.vma) &&
         c.U64(record.old_code_addr) && c.U64(record.code_addr) && c.U64(record.code_size) &&
         c.U64(record.code_index);
}

bool ParseDebugInfo(Cursor& c, uint64_t& code_addr, std::vector<JitLineEntry>& lines) {
  uint64_t count = 0;
  if (!c.U64(code_addr) || !c.U64(count)) return false;
  std::string previous_file;
  for (uint64_t i = 0; i < count; ++i) {
    JitLineEntry entry;
    if (!c.U64(entry.address) || !c.I32(entry.line) || !c.I32(entry.discriminator) ||
        !c.CString(entry.file)) {
      return false;
    }
    if (entry.file == "\xff") entry.file = previous_file;  // "\xff\0": same file as before
    previous_file = entry.file;
    lines.push_back(std::move(entry));
  }
  return true;
}

}  // namespace

Result<JitDump> ParseJitdump(const uint8_t* data, size_t size, const std::string& source) {
  JitDump dump;
  if (size < kHeaderSize) {
    return Unexpected(Errc::kTruncated, source + ": " + std::to_string(size) +
                                            " bytes is shorter than a jitdump header (40)");
  }
  uint32_t magic = static_cast<uint32_t>(data[0]) | static_cast<uint32_t>(data[1]) << 8 |
                   static_cast<uint32_t>(data[2]) << 16 | static_cast<uint32_t>(data[3]) << 24;
  if (magic == __builtin_bswap32(kJitdumpMagic)) {
    dump.byte_swapped = true;
  } else if (magic != kJitdumpMagic) {
    return Unexpected(Errc::kBadMagic, source + ": offset 0: not a jitdump file (magic is not "
                                                "\"JiTD\")");
  }
  Cursor header(data, 4, size, dump.byte_swapped);
  uint32_t header_size = 0, pad = 0;
  header.U32(dump.version);
  header.U32(header_size);
  header.U32(dump.elf_mach);
  header.U32(pad);
  header.U32(dump.pid);
  header.U64(dump.timestamp);
  header.U64(dump.flags);
  if (dump.version != 1) {
    return Unexpected(Errc::kUnsupportedVersion,
                      At(source, 4) + "jitdump version " + std::to_string(dump.version) +
                          " is not supported (only 1)");
  }
  if (header_size < kHeaderSize || header_size > size) {
    return Unexpected(Errc::kCorrupt, At(source, 8) + "header total_size " +
                                          std::to_string(header_size) + " is outside 40.." +
                                          std::to_string(size));
  }
  dump.arch_timestamp = (dump.flags & kJitdumpArchTimestamp) != 0;

  std::map<uint64_t, std::vector<JitLineEntry>> pending_lines;  // by code_addr, until the LOAD
  size_t offset = header_size;
  while (offset < size) {
    if (size - offset < kPrefixSize) {
      dump.damage = At(source, offset) + "truncated record header (" +
                    std::to_string(size - offset) + " bytes left)";
      break;
    }
    Cursor prefix(data, offset, size, dump.byte_swapped);
    uint32_t id = 0, record_size = 0;
    uint64_t timestamp = 0;
    prefix.U32(id);
    prefix.U32(record_size);
    prefix.U64(timestamp);
    if (record_size < kPrefixSize) {
      dump.damage = At(source, offset) + "record total_size " + std::to_string(record_size) +
                    " is smaller than its 16-byte prefix";
      break;
    }
    if (record_size > size - offset) {
      dump.damage = At(source, offset) + "truncated record (id " + std::to_string(id) + ", " +
                    std::to_string(record_size) + " bytes, " + std::to_string(size - offset) +
                    " left)";
      break;
    }
    Cursor body(data, offset + kPrefixSize, offset + record_size, dump.byte_swapped);
    bool ok = true;
    if (id == kCodeLoad || id == kCodeMove) {
      JitCodeRecord record;
      record.timestamp = timestamp;
      ok = id == kCodeLoad ? ParseLoad(body, record) : ParseMove(body, record);
      if (ok && id == kCodeLoad) {
        auto lines = pending_lines.find(record.code_addr);
        if (lines != pending_lines.end()) {
          record.lines = std::move(lines->second);
          pending_lines.erase(lines);
        }
      }
      if (ok) dump.records.push_back(std::move(record));
    } else if (id == kCodeDebugInfo) {
      uint64_t code_addr = 0;
      std::vector<JitLineEntry> lines;
      ok = ParseDebugInfo(body, code_addr, lines);
      if (ok) pending_lines[code_addr] = std::move(lines);
    } else if (id == kCodeClose) {
      dump.closed = true;
    } else {
      ++dump.skipped_records;  // UNWINDING_INFO (we unwind from the trace) and future ids
    }
    if (!ok) {
      dump.damage = At(source, offset) + "record id " + std::to_string(id) + " (" +
                    std::to_string(record_size) + " bytes) is shorter than its fields";
      break;
    }
    offset += record_size;
  }
  return dump;
}

}  // namespace ptscope::symbols
