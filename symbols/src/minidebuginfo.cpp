// .gnu_debugdata: liblzma + LLVM (see minidebuginfo.h).
#include "minidebuginfo.h"

#include <llvm/DebugInfo/Symbolize/Symbolize.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <lzma.h>

#include <algorithm>

namespace ptscope::symbols {
namespace {

constexpr uint64_t kMaxInflated = uint64_t{256} << 20;

Result<std::vector<uint8_t>> InflateXz(const uint8_t* data, size_t size, const std::string& where) {
  lzma_stream stream = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&stream, kMaxInflated, 0) != LZMA_OK) {
    return Unexpected(Errc::kInternal, where + ": cannot start an xz decoder");
  }
  std::vector<uint8_t> out(std::max<size_t>(size * 4, 4096));
  stream.next_in = data;
  stream.avail_in = size;
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    if (stream.total_out == out.size()) {
      if (out.size() >= kMaxInflated) break;
      out.resize(std::min<uint64_t>(out.size() * 2, kMaxInflated));
    }
    stream.next_out = out.data() + stream.total_out;
    stream.avail_out = out.size() - stream.total_out;
    ret = lzma_code(&stream, LZMA_FINISH);
  }
  uint64_t produced = stream.total_out;
  lzma_end(&stream);
  if (ret != LZMA_STREAM_END) {
    return Unexpected(Errc::kCorrupt, where + ": .gnu_debugdata is not a valid xz stream (lzma " +
                                          std::to_string(static_cast<int>(ret)) +
                                          "): names come from other symbol sources only");
  }
  out.resize(produced);
  return out;
}

}  // namespace

Result<std::vector<uint8_t>> ReadMiniDebugInfo(const std::string& path) {
  auto owning = llvm::object::ObjectFile::createObjectFile(path);
  if (!owning) {
    return Unexpected(Errc::kIo, path + ": " + llvm::toString(owning.takeError()));
  }
  for (const llvm::object::SectionRef& section : owning->getBinary()->sections()) {
    auto name = section.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name != ".gnu_debugdata") continue;
    auto contents = section.getContents();
    if (!contents) {
      return Unexpected(Errc::kCorrupt, path + ": .gnu_debugdata: " +
                                            llvm::toString(contents.takeError()));
    }
    return InflateXz(reinterpret_cast<const uint8_t*>(contents->data()), contents->size(), path);
  }
  return Unexpected(Errc::kNotFound, path + ": no .gnu_debugdata section");
}

struct MiniDebugInfoSymbolizer::Impl {
  struct Module {
    std::unique_ptr<llvm::MemoryBuffer> buffer;  // owns the inflated ELF
    std::unique_ptr<llvm::object::ObjectFile> object;
    std::vector<std::pair<uint64_t, uint64_t>> functions;  // (start, size), sorted
  };
  Impl() : llvm_symbolizer(MakeOptions()) {}
  static llvm::symbolize::LLVMSymbolizer::Options MakeOptions() {
    llvm::symbolize::LLVMSymbolizer::Options options;
    options.Demangle = true;
    options.UseSymbolTable = true;
    return options;
  }
  Module* Load(const std::string& path) {
    auto it = modules.find(path);
    if (it != modules.end()) return it->second.get();
    std::unique_ptr<Module> module;
    if (Result<std::vector<uint8_t>> bytes = ReadMiniDebugInfo(path)) {
      auto candidate = std::make_unique<Module>();
      candidate->buffer = llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char*>(bytes->data()), bytes->size()),
          path + "[.gnu_debugdata]");
      auto object = llvm::object::ObjectFile::createObjectFile(candidate->buffer->getMemBufferRef());
      if (object) {
        candidate->object = std::move(*object);
        for (const llvm::object::SymbolRef& symbol : candidate->object->symbols()) {
          auto type = symbol.getType();
          auto address = symbol.getAddress();
          if (type && address && *type == llvm::object::SymbolRef::ST_Function && *address != 0) {
            candidate->functions.emplace_back(*address,
                                              llvm::object::ELFSymbolRef(symbol).getSize());
          }
          if (!type) llvm::consumeError(type.takeError());
          if (!address) llvm::consumeError(address.takeError());
        }
        std::sort(candidate->functions.begin(), candidate->functions.end());
        module = std::move(candidate);
      } else {
        llvm::consumeError(object.takeError());
      }
    }
    Module* raw = module.get();
    modules.emplace(path, std::move(module));
    return raw;
  }

  std::mutex mutex;
  llvm::symbolize::LLVMSymbolizer llvm_symbolizer;
  std::map<std::string, std::unique_ptr<Module>> modules;  // nullptr: none or unusable
};

MiniDebugInfoSymbolizer::MiniDebugInfoSymbolizer() : impl_(std::make_unique<Impl>()) {}
MiniDebugInfoSymbolizer::~MiniDebugInfoSymbolizer() = default;

bool MiniDebugInfoSymbolizer::Has(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->Load(path) != nullptr;
}

std::vector<std::pair<uint64_t, uint64_t>> MiniDebugInfoSymbolizer::Functions(
    const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Impl::Module* module = impl_->Load(path);
  return module == nullptr ? std::vector<std::pair<uint64_t, uint64_t>>{} : module->functions;
}

MiniSymbol MiniDebugInfoSymbolizer::Symbolize(const std::string& path, uint64_t vaddr) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  MiniSymbol result;
  Impl::Module* module = impl_->Load(path);
  if (module == nullptr) return result;
  llvm::object::SectionedAddress address{vaddr, llvm::object::SectionedAddress::UndefSection};
  auto info = impl_->llvm_symbolizer.symbolizeCode(*module->object, address);
  if (!info) {
    llvm::consumeError(info.takeError());
    return result;
  }
  if (info->FunctionName.empty() || info->FunctionName == llvm::DILineInfo::BadString) return result;
  result.found = true;
  result.function = info->FunctionName;
  // The innermost function symbol that starts at or before vaddr and (if sized) contains it.
  auto& functions = module->functions;
  auto it = std::upper_bound(functions.begin(), functions.end(),
                             std::make_pair(vaddr, UINT64_MAX));
  while (it != functions.begin()) {
    --it;
    if (it->second == 0 || vaddr < it->first + it->second) {
      result.function_start = it->first;
      break;
    }
  }
  return result;
}

}  // namespace ptscope::symbols
