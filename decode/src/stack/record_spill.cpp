// Held-back slice records, compactly encoded, in memory or a temporary file (see record_spill.h).
#include "stack/record_spill.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "temp_file.h"
#include "varint.h"

namespace ptscope::decode {
namespace {

using Type = SliceRecord::Type;

// Tag byte (record_spill.h "Encoding").
constexpr uint8_t kTypeMask = 0x03;
constexpr uint8_t kInferred = 0x04;
constexpr unsigned kKindShift = 3;
constexpr uint8_t kSameFrame = 7;  // in the kind bits
constexpr uint8_t kSameClock = 0x40;
constexpr uint8_t kHasExtra = 0x80;
// The flags byte.
constexpr uint8_t kExtraInlineIndex = 0x01;

static_assert(static_cast<uint8_t>(FrameId::Kind::kInlined) < kSameFrame,
              "every frame kind needs a value in the tag besides 'same frame'");
static_assert(static_cast<uint8_t>(Type::kInstant) <= kTypeMask);

// The most bytes Decode reads for one record, valid or not: tag, flags and 5 varints of at most
// 10 bytes. While that many are left, no read can pass the end: it is tested once per record.
constexpr size_t kMaxRecordRead = 2 + 5 * 10;

}  // namespace

size_t RecordSpill::Encode(const SliceRecord* records, size_t count, uint8_t* out,
                          std::vector<std::string>* texts) {
  // The clock of the record before, and the frame of the last record that has one (an instant's
  // frame.address is its text: SliceRecord::text()).
  SliceRecord prev;
  uint8_t* p = out;
  for (const SliceRecord* r = records; r != records + count; ++r) {
    const bool instant = r->type == Type::kInstant;
    const bool same_frame = instant || r->frame == prev.frame;
    const bool same_clock = r->time_ns == prev.time_ns && r->instructions == prev.instructions;
    uint8_t extra = 0;
    if (!same_frame && r->frame.inline_index != 0) extra |= kExtraInlineIndex;
    const uint8_t kind = same_frame ? kSameFrame : static_cast<uint8_t>(r->frame.kind);
    *p++ = static_cast<uint8_t>(static_cast<uint8_t>(r->type) | (r->inferred ? kInferred : 0) |
                                (kind << kKindShift) | (same_clock ? kSameClock : 0) |
                                (extra != 0 ? kHasExtra : 0));
    if (extra != 0) *p++ = extra;
    if (!same_clock) {
      p = PutVarint(p, r->time_ns - prev.time_ns);  // modulo 2^64: exact both ways
      p = PutVarint(p, r->instructions - prev.instructions);
    }
    if (!same_frame) p = PutVarint(p, Zigzag(r->frame.address - prev.frame.address));
    if ((extra & kExtraInlineIndex) != 0) p = PutVarint(p, r->frame.inline_index);
    if (instant) {
      // A copy, by index: the record's pointer is not the block's to keep, and bytes read back
      // must never give a pointer.
      uint64_t index = 0;
      if (r->text() != nullptr) {
        texts->push_back(*r->text());
        index = texts->size();
      }
      p = PutVarint(p, index);
    } else {
      prev.frame = r->frame;
    }
    prev.time_ns = r->time_ns;
    prev.instructions = r->instructions;
  }
  return static_cast<size_t>(p - out);
}

namespace {

// One record of RecordSpill::Decode after `prev` (the record before's clock, the frame of the
// last one that has a frame); updates `prev`. Returns the position after it, or null.
template <bool kChecked>
inline const uint8_t* DecodeRecord(const uint8_t* p, const uint8_t* end, SliceRecord& prev,
                                   SliceRecord* r, const std::string* texts, size_t text_count) {
  if (kChecked && p == end) [[unlikely]] return nullptr;
  const uint8_t tag = *p++;
  const uint8_t type = tag & kTypeMask;
  if (type > static_cast<uint8_t>(Type::kInstant)) [[unlikely]] return nullptr;
  const bool instant = type == static_cast<uint8_t>(Type::kInstant);
  const uint8_t kind = (tag >> kKindShift) & 7;
  // Only what Encode writes: an instant with no frame and no flags byte.
  if (instant && (kind != kSameFrame || (tag & kHasExtra) != 0)) [[unlikely]] return nullptr;
  uint8_t extra = 0;
  if ((tag & kHasExtra) != 0) {
    if (kChecked && p == end) [[unlikely]] return nullptr;
    extra = *p++;
    // Only what Encode writes: the inline index flag, with a new frame.
    if (extra != kExtraInlineIndex || kind == kSameFrame) [[unlikely]] return nullptr;
  }
  uint64_t v;
  if ((tag & kSameClock) != 0) {
    r->time_ns = prev.time_ns;
    r->instructions = prev.instructions;
  } else {
    if ((p = GetVarint<kChecked>(p, end, &v)) == nullptr) [[unlikely]] return nullptr;
    r->time_ns = prev.time_ns + v;
    if ((p = GetVarint<kChecked>(p, end, &v)) == nullptr) [[unlikely]] return nullptr;
    r->instructions = prev.instructions + v;
  }
  prev.time_ns = r->time_ns;
  prev.instructions = r->instructions;
  if (instant) {
    if ((p = GetVarint<kChecked>(p, end, &v)) == nullptr || v > text_count) [[unlikely]] {
      return nullptr;
    }
    r->SetText(v != 0 ? &texts[v - 1] : nullptr);
  } else if (kind == kSameFrame) {
    r->frame.address = prev.frame.address;  // field by field: type and inferred follow
    r->frame.inline_index = prev.frame.inline_index;
    r->frame.kind = prev.frame.kind;
  } else {
    if ((p = GetVarint<kChecked>(p, end, &v)) == nullptr) [[unlikely]] return nullptr;
    r->frame.address = prev.frame.address + Unzigzag(v);
    r->frame.kind = static_cast<FrameId::Kind>(kind);
    r->frame.inline_index = 0;
    if ((extra & kExtraInlineIndex) != 0) {
      if ((p = GetVarint<kChecked>(p, end, &v)) == nullptr || v > UINT32_MAX) [[unlikely]] {
        return nullptr;
      }
      r->frame.inline_index = static_cast<uint32_t>(v);
    }
    prev.frame.address = r->frame.address;
    prev.frame.inline_index = r->frame.inline_index;
    prev.frame.kind = r->frame.kind;
  }
  r->type = static_cast<Type>(type);
  r->inferred = (tag & kInferred) != 0;
  return p;
}

}  // namespace

const uint8_t* RecordSpill::Decode(const uint8_t* p, const uint8_t* end, size_t count,
                                   SliceRecord* prev_io, SliceRecord* out,
                                   const std::string* texts, size_t text_count) {
  SliceRecord prev = *prev_io;
  for (SliceRecord* r = out; r != out + count; ++r) {
    p = static_cast<size_t>(end - p) >= kMaxRecordRead
            ? DecodeRecord<false>(p, end, prev, r, texts, text_count)
            : DecodeRecord<true>(p, end, prev, r, texts, text_count);
    if (p == nullptr) [[unlikely]] return nullptr;
  }
  *prev_io = prev;
  return p;
}

RecordSpill::RecordSpill(size_t block_records, size_t raw_bytes, size_t encoded_bytes)
    : block_records_(std::max<size_t>(1, block_records)),
      raw_bytes_(raw_bytes),
      encoded_bytes_(encoded_bytes) {}

RecordSpill::~RecordSpill() {
  if (fd_ >= 0) close(fd_);
}

bool RecordSpill::OpenFile() {
  if (fd_ >= 0) return true;
  if (unusable_) return false;
  fd_ = OpenScratchFile(&path_);
  if (fd_ < 0) unusable_ = true;
  return fd_ >= 0;
}

int64_t RecordSpill::Store(std::vector<SliceRecord>& buffer, size_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  const SliceRecord* records = buffer.data();
  Block block;
  block.records = count;
  const size_t raw_block_bytes = block_records_ * sizeof(SliceRecord);
  if (count == block_records_ && buffer.size() == block_records_ &&
      (!raw_pool_.empty() || raw_allocated_ + raw_block_bytes <= raw_bytes_)) {
    // Kept as it is: the cheapest place (no copy, no encoding), while the budget allows.
    block.raw.swap(buffer);
    if (!raw_pool_.empty()) {
      buffer.swap(raw_pool_.back());
      raw_pool_.pop_back();
    } else {
      buffer.resize(block_records_);
      raw_allocated_ += raw_block_bytes;
    }
    ++raw_;
  } else {
    // Encoded here, under the lock: one scratch block for all trackers (the trackers of a
    // decode run on the join's thread; a per-CPU capture has many).
    if (!scratch_) scratch_ = std::make_unique_for_overwrite<uint8_t[]>(SlotBytes());
    const bool fits_slot = count <= block_records_;
    std::unique_ptr<uint8_t[]> oversized;  // more records than a block: encoded apart, in memory
    uint8_t* encoded = scratch_.get();
    if (!fits_slot) {
      oversized = std::make_unique_for_overwrite<uint8_t[]>(count * kMaxRecordBytes);
      encoded = oversized.get();
    }
    block.size = Encode(records, count, encoded, &block.texts);
    bytes_ += block.size;
    if (fits_slot && in_memory_ + block.size > encoded_bytes_ && OpenFile()) {
      int64_t slot;
      if (!free_slots_.empty()) {
        slot = free_slots_.back();
        free_slots_.pop_back();
      } else {
        slot = slots_++;
      }
      if (WriteAllAt(fd_, encoded, block.size,
                   static_cast<off_t>(slot) * static_cast<off_t>(SlotBytes()))) {
        block.slot = slot;
        ++in_file_;
      } else {
        // Disk full or the like: blocks stay in memory from now on, past the budget.
        free_slots_.push_back(slot);
        unusable_ = true;
      }
    }
    if (block.slot < 0) {
      block.bytes = std::make_unique_for_overwrite<uint8_t[]>(block.size);
      std::memcpy(block.bytes.get(), encoded, block.size);
      in_memory_ += block.size;
    }
  }
  int64_t handle;
  if (!free_blocks_.empty()) {
    handle = free_blocks_.back();
    free_blocks_.pop_back();
    blocks_[static_cast<size_t>(handle)] = std::move(block);
  } else {
    handle = static_cast<int64_t>(blocks_.size());
    blocks_.push_back(std::move(block));
  }
  ++stored_;
  peak_in_use_ = std::max(peak_in_use_, ++in_use_);
  return handle;
}

void RecordSpill::Release(int64_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  Block& block = blocks_[static_cast<size_t>(handle)];
  if (!block.raw.empty()) {
    raw_pool_.push_back(std::move(block.raw));  // for the next Store: no new pages to touch
  } else if (block.slot >= 0) {
    free_slots_.push_back(block.slot);
  } else {
    in_memory_ -= block.size;
  }
  block = Block{};
  free_blocks_.push_back(handle);
  --in_use_;
}

void RecordSpill::Fail(bool in_file, const std::string& why) {
  if (!error_.empty()) return;
  error_ = "cannot read held-back slice records back from " +
           (in_file ? "the temporary file in " + path_ : std::string("memory")) + " (" + why +
           "): the output would lack them; set TMPDIR to a directory on a working disk, or "
           "decode a shorter --time-range";
}

bool RecordSpill::Reader::Open(RecordSpill& spill, int64_t handle) {
  std::lock_guard<std::mutex> lock(spill.mutex_);
  const Block& block = spill.blocks_[static_cast<size_t>(handle)];
  spill_ = &spill;
  prev_ = SliceRecord{};
  raw_ = nullptr;
  next_ = end_ = nullptr;
  left_ = read_ = 0;
  // Stays where it is until Release (blocks_ may grow meanwhile: the vector's array does not
  // move), as do the raw records and the encoded bytes below.
  texts_ = block.texts.data();
  text_count_ = block.texts.size();
  in_file_ = block.slot >= 0;
  bytes_ = block.size;
  if (!block.raw.empty()) {
    raw_ = block.raw.data();
    left_ = block.records;
    return true;
  }
  if (block.bytes) {
    next_ = block.bytes.get();
    end_ = next_ + block.size;
    left_ = block.records;
    return true;
  }
  if (file_bytes_.size() < block.size) file_bytes_.resize(block.size);
  const off_t offset = static_cast<off_t>(block.slot) * static_cast<off_t>(spill.SlotBytes());
  if (spill.fd_ < 0 || !ReadAllAt(spill.fd_, file_bytes_.data(), block.size, offset)) {
    spill.Fail(true, std::strerror(errno));
    return false;
  }
  next_ = file_bytes_.data();
  end_ = next_ + block.size;
  left_ = block.records;
  return true;
}

size_t RecordSpill::Reader::Read(const SliceRecord** run, SliceRecord* scratch, size_t max) {
  const size_t count = std::min(max, left_);
  if (raw_ != nullptr) {
    *run = raw_;
    raw_ += count;
  } else if (count > 0) {
    const uint8_t* after = Decode(next_, end_, count, &prev_, scratch, texts_, text_count_);
    // Every record in the block's bytes, and no byte left over after the last.
    if (after == nullptr || (count == left_ && after != end_)) [[unlikely]] {
      std::lock_guard<std::mutex> lock(spill_->mutex_);
      spill_->Fail(in_file_, "the encoded block of " + std::to_string(read_ + left_) +
                                 " records in " + std::to_string(bytes_) +
                                 " bytes is corrupt at or after record " +
                                 std::to_string(read_));
      left_ = 0;
      return 0;
    }
    next_ = after;
    *run = scratch;
  }
  left_ -= count;
  read_ += count;
  return count;
}

uint64_t RecordSpill::blocks_stored() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stored_;
}

uint64_t RecordSpill::blocks_raw() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return raw_;
}

uint64_t RecordSpill::blocks_in_file() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_file_;
}

size_t RecordSpill::peak_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_in_use_;
}

uint64_t RecordSpill::bytes_stored() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

std::string RecordSpill::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

}  // namespace ptscope::decode
