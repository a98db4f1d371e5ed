// MakeLazyDwarfContext (see lazy_dwarf.h).
#include "lazy_dwarf.h"

#include <llvm/ADT/StringSwitch.h>
#include <llvm/DebugInfo/DWARF/DWARFObject.h>
#include <llvm/Object/BuildID.h>
#include <llvm/Object/Decompressor.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Support/MemoryBuffer.h>

#include <array>
#include <cstdio>
#include <deque>
#include <vector>

namespace ptscope::symbols {
namespace {

// LLVM's getters, one slot each. The names are those LLVM maps to them (after dropping the
// leading "." and, for GNU-compressed sections, "z").
enum Slot : uint8_t {
  kLoc, kLoclists, kLoclistsDwo, kLine, kFrame, kEhFrame, kStrOffsets, kRanges, kRnglists,
  kLocDwo, kLineDwo, kNames, kRnglistsDwo, kStrOffsetsDwo, kAddr, kAppleNames, kPubnames,
  kPubtypes, kGnuPubnames, kGnuPubtypes, kAppleTypes, kAppleNamespaces, kAppleObjC, kMacro,
  kAbbrev, kAranges, kStr, kMacinfo, kMacinfoDwo, kMacroDwo, kAbbrevDwo, kStrDwo, kCuIndex,
  kTuIndex, kGdbIndex, kLineStr, kSlotCount, kNoSlot = kSlotCount
};

Slot SlotOf(llvm::StringRef name) {
  return llvm::StringSwitch<Slot>(name)
      .Case("debug_loc", kLoc).Case("debug_loclists", kLoclists)
      .Case("debug_loclists.dwo", kLoclistsDwo).Case("debug_line", kLine)
      .Case("debug_frame", kFrame).Case("eh_frame", kEhFrame)
      .Case("debug_str_offsets", kStrOffsets).Case("debug_ranges", kRanges)
      .Case("debug_rnglists", kRnglists).Case("debug_loc.dwo", kLocDwo)
      .Case("debug_line.dwo", kLineDwo).Case("debug_names", kNames)
      .Case("debug_rnglists.dwo", kRnglistsDwo).Case("debug_str_offsets.dwo", kStrOffsetsDwo)
      .Case("debug_addr", kAddr).Case("apple_names", kAppleNames)
      .Case("debug_pubnames", kPubnames).Case("debug_pubtypes", kPubtypes)
      .Case("debug_gnu_pubnames", kGnuPubnames).Case("debug_gnu_pubtypes", kGnuPubtypes)
      .Case("apple_types", kAppleTypes).Case("apple_namespaces", kAppleNamespaces)
      .Case("apple_namespac", kAppleNamespaces).Case("apple_objc", kAppleObjC)
      .Case("debug_macro", kMacro).Case("debug_abbrev", kAbbrev)
      .Case("debug_aranges", kAranges).Case("debug_str", kStr)
      .Case("debug_macinfo", kMacinfo).Case("debug_macinfo.dwo", kMacinfoDwo)
      .Case("debug_macro.dwo", kMacroDwo).Case("debug_abbrev.dwo", kAbbrevDwo)
      .Case("debug_str.dwo", kStrDwo).Case("debug_cu_index", kCuIndex)
      .Case("debug_tu_index", kTuIndex).Case("gdb_index", kGdbIndex)
      .Case("debug_line_str", kLineStr)
      .Default(kNoSlot);
}

class LazyDwarfObject final : public llvm::DWARFObject {
 public:
  LazyDwarfObject(const llvm::object::ObjectFile& object, const SectionCache* cache,
                  std::function<void(llvm::Error)> on_error)
      : object_(object), cache_(cache), on_error_(std::move(on_error)),
        build_id_(cache != nullptr && cache->enabled() ? BuildIdHex(object) : std::string()) {
    llvm::StringMap<unsigned> name_count;
    for (const llvm::object::SectionRef& section : object.sections()) {
      llvm::StringRef name;
      if (auto named = section.getName()) {
        name = *named;
      } else {
        llvm::consumeError(named.takeError());
      }
      ++name_count[name];
      names_.push_back({name, true});
      if (section.isBSS() || section.isVirtual() || section.isStripped()) continue;
      llvm::StringRef key = object.mapDebugSectionName(name.substr(name.find_first_not_of("._z")));
      Lazy lazy;
      lazy.ref = section;
      lazy.name = name;
      if (key == "debug_frame" || key == "eh_frame") lazy.section.Address = section.getAddress();
      if (Slot slot = SlotOf(key); slot != kNoSlot) {
        slots_[slot] = lazy;
        if (slot == kRanges) ranges_dwo_ = lazy;  // as LLVM: .debug_ranges serves both
      } else if (key == "debug_info") {
        info_.push_back(lazy);
      } else if (key == "debug_info.dwo") {
        info_dwo_.push_back(lazy);
      } else if (key == "debug_types") {
        types_.push_back(lazy);
      } else if (key == "debug_types.dwo") {
        types_dwo_.push_back(lazy);
      }
    }
    for (llvm::SectionName& entry : names_) entry.IsNameUnique = name_count[entry.Name] == 1;
  }

  llvm::StringRef getFileName() const override { return object_.getFileName(); }
  const llvm::object::ObjectFile* getFile() const override { return &object_; }
  llvm::ArrayRef<llvm::SectionName> getSectionNames() const override { return names_; }
  bool isLittleEndian() const override { return object_.isLittleEndian(); }
  uint8_t getAddressSize() const override { return object_.getBytesInAddress(); }
  void forEachInfoSections(llvm::function_ref<void(const llvm::DWARFSection&)> f) const override {
    for (Lazy& lazy : info_) f(Load(lazy));
  }
  void forEachTypesSections(llvm::function_ref<void(const llvm::DWARFSection&)> f) const override {
    for (Lazy& lazy : types_) f(Load(lazy));
  }
  void forEachInfoDWOSections(
      llvm::function_ref<void(const llvm::DWARFSection&)> f) const override {
    for (Lazy& lazy : info_dwo_) f(Load(lazy));
  }
  void forEachTypesDWOSections(
      llvm::function_ref<void(const llvm::DWARFSection&)> f) const override {
    for (Lazy& lazy : types_dwo_) f(Load(lazy));
  }
  const llvm::DWARFSection& getLocSection() const override { return Get(kLoc); }
  const llvm::DWARFSection& getLoclistsSection() const override { return Get(kLoclists); }
  const llvm::DWARFSection& getLoclistsDWOSection() const override { return Get(kLoclistsDwo); }
  const llvm::DWARFSection& getLineSection() const override { return Get(kLine); }
  const llvm::DWARFSection& getFrameSection() const override { return Get(kFrame); }
  const llvm::DWARFSection& getEHFrameSection() const override { return Get(kEhFrame); }
  const llvm::DWARFSection& getStrOffsetsSection() const override { return Get(kStrOffsets); }
  const llvm::DWARFSection& getRangesSection() const override { return Get(kRanges); }
  const llvm::DWARFSection& getRnglistsSection() const override { return Get(kRnglists); }
  const llvm::DWARFSection& getLocDWOSection() const override { return Get(kLocDwo); }
  const llvm::DWARFSection& getLineDWOSection() const override { return Get(kLineDwo); }
  const llvm::DWARFSection& getNamesSection() const override { return Get(kNames); }
  const llvm::DWARFSection& getRnglistsDWOSection() const override { return Get(kRnglistsDwo); }
  const llvm::DWARFSection& getStrOffsetsDWOSection() const override {
    return Get(kStrOffsetsDwo);
  }
  const llvm::DWARFSection& getRangesDWOSection() const override { return Load(ranges_dwo_); }
  const llvm::DWARFSection& getAddrSection() const override { return Get(kAddr); }
  const llvm::DWARFSection& getAppleNamesSection() const override { return Get(kAppleNames); }
  const llvm::DWARFSection& getPubnamesSection() const override { return Get(kPubnames); }
  const llvm::DWARFSection& getPubtypesSection() const override { return Get(kPubtypes); }
  const llvm::DWARFSection& getGnuPubnamesSection() const override { return Get(kGnuPubnames); }
  const llvm::DWARFSection& getGnuPubtypesSection() const override { return Get(kGnuPubtypes); }
  const llvm::DWARFSection& getAppleTypesSection() const override { return Get(kAppleTypes); }
  const llvm::DWARFSection& getAppleNamespacesSection() const override {
    return Get(kAppleNamespaces);
  }
  const llvm::DWARFSection& getAppleObjCSection() const override { return Get(kAppleObjC); }
  const llvm::DWARFSection& getMacroSection() const override { return Get(kMacro); }
  llvm::StringRef getAbbrevSection() const override { return Get(kAbbrev).Data; }
  llvm::StringRef getArangesSection() const override { return Get(kAranges).Data; }
  llvm::StringRef getStrSection() const override { return Get(kStr).Data; }
  llvm::StringRef getMacinfoSection() const override { return Get(kMacinfo).Data; }
  llvm::StringRef getMacinfoDWOSection() const override { return Get(kMacinfoDwo).Data; }
  llvm::StringRef getMacroDWOSection() const override { return Get(kMacroDwo).Data; }
  llvm::StringRef getAbbrevDWOSection() const override { return Get(kAbbrevDwo).Data; }
  llvm::StringRef getStrDWOSection() const override { return Get(kStrDwo).Data; }
  llvm::StringRef getCUIndexSection() const override { return Get(kCuIndex).Data; }
  llvm::StringRef getTUIndexSection() const override { return Get(kTuIndex).Data; }
  llvm::StringRef getGdbIndexSection() const override { return Get(kGdbIndex).Data; }
  llvm::StringRef getLineStrSection() const override { return Get(kLineStr).Data; }
  // Only relocatable objects carry relocations LLVM applies to DWARF, and they are not served.
  std::optional<llvm::RelocAddrEntry> find(const llvm::DWARFSection&, uint64_t) const override {
    return std::nullopt;
  }

 private:
  struct Lazy {
    std::optional<llvm::object::SectionRef> ref;  // none: the file has no such section
    llvm::StringRef name;                          // as in the file, e.g. ".debug_info"
    bool loaded = false;
    llvm::DWARFSection section;  // Data empty until loaded, and when it cannot be read
  };

  const llvm::DWARFSection& Get(Slot slot) const { return Load(slots_[slot]); }
  const llvm::DWARFSection& Load(Lazy& lazy) const {
    if (!lazy.loaded) Read(lazy);
    return lazy.section;
  }
  void Read(Lazy& lazy) const;

  const llvm::object::ObjectFile& object_;
  const SectionCache* cache_;
  std::function<void(llvm::Error)> on_error_;
  std::string build_id_;  // hex, "" when none
  std::vector<llvm::SectionName> names_;
  // Loaded on first use through const getters (LLVM's interface), hence mutable.
  mutable std::array<Lazy, kSlotCount> slots_;
  mutable Lazy ranges_dwo_;
  mutable std::vector<Lazy> info_, info_dwo_, types_, types_dwo_;
  mutable std::deque<std::unique_ptr<llvm::MemoryBuffer>> buffers_;  // decompressed bytes
};

void LazyDwarfObject::Read(Lazy& lazy) const {
  lazy.loaded = true;
  if (!lazy.ref) return;
  auto fail = [&](llvm::Error error) {
    on_error_(llvm::createStringError(llvm::inconvertibleErrorCode(),
                                      "failed to decompress '%s', %s", lazy.name.str().c_str(),
                                      llvm::toString(std::move(error)).c_str()));
  };
  llvm::StringRef contents;
  if (auto read = lazy.ref->getContents()) {
    contents = *read;
  } else if (!lazy.ref->isCompressed()) {
    llvm::consumeError(read.takeError());  // LLVM reads such a section as empty, silently
    return;
  } else {
    fail(read.takeError());
    return;
  }
  if (!lazy.ref->isCompressed()) {
    lazy.section.Data = contents;
    return;
  }
  if (cache_ != nullptr && !build_id_.empty()) {
    if (auto hit = cache_->Find(build_id_, lazy.name, contents)) {
      lazy.section.Data = hit->bytes;
      buffers_.push_back(std::move(hit->file));
      return;
    }
  }
  auto decompressor = llvm::object::Decompressor::create(
      lazy.name, contents, object_.isLittleEndian(), object_.getBytesInAddress() == 8);
  if (!decompressor) {
    fail(decompressor.takeError());
    return;
  }
  std::unique_ptr<llvm::WritableMemoryBuffer> out =
      llvm::WritableMemoryBuffer::getNewUninitMemBuffer(decompressor->getDecompressedSize());
  if (!out) {
    fail(llvm::createStringError(llvm::inconvertibleErrorCode(), "out of memory"));
    return;
  }
  if (llvm::Error error = decompressor->decompress(
          {reinterpret_cast<uint8_t*>(out->getBufferStart()), out->getBufferSize()})) {
    fail(std::move(error));
    return;
  }
  lazy.section.Data = llvm::StringRef(out->getBufferStart(), out->getBufferSize());
  if (cache_ != nullptr && !build_id_.empty()) {
    cache_->Store(build_id_, lazy.name, contents, lazy.section.Data);
  }
  buffers_.push_back(std::move(out));
}

}  // namespace

std::unique_ptr<llvm::DWARFContext> MakeLazyDwarfContext(
    const llvm::object::ObjectFile& object, const SectionCache* cache,
    std::function<void(llvm::Error)> on_error) {
  if (!object.isELF() || object.isRelocatableObject()) {
    return llvm::DWARFContext::create(object, llvm::DWARFContext::ProcessDebugRelocations::Process,
                                      nullptr, "", on_error, on_error);
  }
  return std::make_unique<llvm::DWARFContext>(
      std::make_unique<LazyDwarfObject>(object, cache, on_error), "", on_error, on_error);
}

}  // namespace ptscope::symbols
