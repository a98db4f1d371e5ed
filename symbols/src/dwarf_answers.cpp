// DwarfAnswers (see dwarf_answers.h).
#include "dwarf_answers.h"

#include <algorithm>
#include <vector>

namespace ptscope::symbols {
namespace {

constexpr uint64_t kVersion = 1;
constexpr const char* kName = "table.dwarf_answers";

void Put(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}
void PutString(std::string& out, const std::string& text) {
  Put(out, text.size());
  out += text;
}

// Reads the payload front to back; any read past its end fails it for good.
class Reader {
 public:
  explicit Reader(llvm::StringRef bytes) : bytes_(bytes) {}
  bool U64(uint64_t* value) {
    if (bytes_.size() < 8) return false;
    *value = 0;
    for (int i = 0; i < 8; ++i) *value |= uint64_t(static_cast<unsigned char>(bytes_[i])) << (8 * i);
    bytes_ = bytes_.drop_front(8);
    return true;
  }
  // A count of items of at least `item_size` bytes each: no more than the bytes left allow.
  bool Count(uint64_t* count, uint64_t item_size) {
    return U64(count) && *count <= bytes_.size() / item_size;
  }
  bool String(std::string* text) {
    uint64_t size = 0;
    if (!U64(&size) || size > bytes_.size()) return false;
    *text = bytes_.take_front(size).str();
    bytes_ = bytes_.drop_front(size);
    return true;
  }
  bool AtEnd() const { return bytes_.empty(); }

 private:
  llvm::StringRef bytes_;
};

}  // namespace

DwarfAnswers::DwarfAnswers(const SectionCache* cache, std::string build_id,
                           SectionCache::Source source)
    : cache_(cache), build_id_(std::move(build_id)), source_(source) {
  if (cache_ == nullptr || !cache_->enabled() || build_id_.empty()) return;
  if (auto hit = cache_->Find(build_id_, kName, source_)) Unpack(hit->bytes);
}

DwarfAnswers::~DwarfAnswers() { Save(); }

std::shared_ptr<const InlineDepthSpan> DwarfAnswers::SpanAt(uint64_t vaddr) const {
  auto after = spans_.upper_bound(vaddr);
  if (after == spans_.begin() || vaddr >= std::prev(after)->second->end) return nullptr;
  return std::prev(after)->second;
}

const llvm::DIInliningInfo* DwarfAnswers::FramesAt(uint64_t vaddr) const {
  auto found = frames_.find(vaddr);
  return found == frames_.end() ? nullptr : &found->second;
}

void DwarfAnswers::AddSpan(std::shared_ptr<const InlineDepthSpan> span) {
  spans_[span->begin] = std::move(span);  // as InlineSpanIndex keeps its own
  added_ = true;
}

void DwarfAnswers::AddFrames(uint64_t vaddr, const llvm::DIInliningInfo& frames) {
  frames_[vaddr] = frames;
  added_ = true;
}

void DwarfAnswers::Save() {
  if (!added_ || cache_ == nullptr || build_id_.empty()) return;
  added_ = false;
  cache_->Store(build_id_, kName, source_, Pack());
}

std::string DwarfAnswers::Pack() const {
  std::string out;
  Put(out, kVersion);
  Put(out, spans_.size());
  for (const auto& [begin, span] : spans_) {
    Put(out, span->begin);
    Put(out, span->end);
    Put(out, span->steps.size());
    for (const InlineDepthSpan::Step& step : span->steps) {
      Put(out, step.vaddr);
      Put(out, step.depth);
    }
  }
  std::vector<uint64_t> addresses;
  addresses.reserve(frames_.size());
  for (const auto& [vaddr, frames] : frames_) addresses.push_back(vaddr);
  std::sort(addresses.begin(), addresses.end());  // the same answers, the same bytes
  Put(out, addresses.size());
  for (uint64_t vaddr : addresses) {
    const llvm::DIInliningInfo& frames = frames_.at(vaddr);
    Put(out, vaddr);
    Put(out, frames.getNumberOfFrames());
    for (uint32_t i = 0; i < frames.getNumberOfFrames(); ++i) {
      const llvm::DILineInfo& frame = frames.getFrame(i);
      Put(out, frame.Line);
      Put(out, frame.StartAddress ? *frame.StartAddress + 1 : 0);
      PutString(out, frame.FunctionName);
      PutString(out, frame.FileName);
    }
  }
  return out;
}

bool DwarfAnswers::Unpack(llvm::StringRef bytes) {
  Reader in(bytes);
  uint64_t version = 0, count = 0;
  if (!in.U64(&version) || version != kVersion || !in.Count(&count, 24)) return false;
  std::map<uint64_t, std::shared_ptr<const InlineDepthSpan>> spans;
  for (uint64_t i = 0; i < count; ++i) {
    auto span = std::make_shared<InlineDepthSpan>();
    uint64_t steps = 0;
    if (!in.U64(&span->begin) || !in.U64(&span->end) || !in.Count(&steps, 16) || steps == 0 ||
        span->begin >= span->end) {
      return false;
    }
    span->steps.resize(steps);
    for (InlineDepthSpan::Step& step : span->steps) {
      uint64_t depth = 0;
      if (!in.U64(&step.vaddr) || !in.U64(&depth) || depth > UINT32_MAX) return false;
      step.depth = static_cast<uint32_t>(depth);
    }
    // DepthAt's binary search needs steps sorted, from begin, inside the span.
    if (span->steps.front().vaddr != span->begin || span->steps.back().vaddr >= span->end) {
      return false;
    }
    for (size_t s = 1; s < span->steps.size(); ++s) {
      if (span->steps[s - 1].vaddr >= span->steps[s].vaddr) return false;
    }
    const uint64_t begin = span->begin;
    spans[begin] = std::move(span);
  }
  std::unordered_map<uint64_t, llvm::DIInliningInfo> frames;
  if (!in.Count(&count, 16)) return false;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t vaddr = 0, n = 0;
    if (!in.U64(&vaddr) || !in.Count(&n, 32)) return false;
    llvm::DIInliningInfo info;
    for (uint64_t f = 0; f < n; ++f) {
      llvm::DILineInfo frame;
      uint64_t line = 0, start = 0;
      if (!in.U64(&line) || line > UINT32_MAX || !in.U64(&start) ||
          !in.String(&frame.FunctionName) || !in.String(&frame.FileName)) {
        return false;
      }
      frame.Line = static_cast<uint32_t>(line);
      if (start != 0) frame.StartAddress = start - 1;
      info.addFrame(frame);
    }
    frames[vaddr] = std::move(info);
  }
  if (!in.AtEnd()) return false;
  spans_ = std::move(spans);
  frames_ = std::move(frames);
  return true;
}

}  // namespace ptscope::symbols
