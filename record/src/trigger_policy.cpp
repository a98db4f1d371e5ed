#include "trigger_policy.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "elf_file.h"
#include "ptscope/format.h"

namespace ptscope::record {
namespace {

using ::ptscope::format::HexAddress;

// The runtime address of link-time `vaddr` of `elf` (mapped from `path`), through `maps`.
Result<uint64_t> PlaceInMaps(const ElfFile& elf, const std::string& path, uint64_t vaddr,
                             const std::vector<MapEntry>& maps) {
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t file_offset, elf.VaddrToFileOffset(vaddr));
  for (const MapEntry& m : maps) {
    if (m.path != path || !m.exec) continue;
    if (file_offset >= m.offset && file_offset - m.offset < m.size())
      return m.start + (file_offset - m.offset);
  }
  return MakeError(Errc::kNotFound, path + ": file offset " + HexAddress(file_offset) +
                                        " of the trigger is not in an executable mapping of the "
                                        "target");
}

}  // namespace

Result<TriggerSpec> ParseTriggerSpec(const std::string& text, const std::string& option) {
  std::string body = text;
  bool force_symbol = false;
  if (body.rfind("symbol:", 0) == 0) {
    body = body.substr(7);
    force_symbol = true;
  } else if (body.rfind("addr:", 0) == 0) {
    body = body.substr(5);
  }
  if (body.empty())
    return MakeError(Errc::kInvalidArgument, option + " '" + text + "' names nothing");
  TriggerSpec spec;
  spec.text = text;
  spec.option = option;
  if (!force_symbol && body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')) {
    auto [ptr, ec] = std::from_chars(body.data() + 2, body.data() + body.size(), spec.address, 16);
    if (ec != std::errc() || ptr != body.data() + body.size() || spec.address == 0)
      return MakeError(Errc::kInvalidArgument,
                       option + " '" + text + "' is not a valid hexadecimal address");
    spec.kind = TriggerSpec::Kind::kAddress;
    return spec;
  }
  if (text.rfind("addr:", 0) == 0)
    return MakeError(Errc::kInvalidArgument, option + " '" + text + "': addr: needs 0x...");
  spec.kind = TriggerSpec::Kind::kSymbol;
  spec.symbol = body;
  // MODULE:SYMBOL (mangled C++ names have no ':'; "symbol:" forces a name that has one).
  if (const size_t colon = body.rfind(':'); !force_symbol && colon != std::string::npos) {
    spec.module = body.substr(0, colon);
    spec.symbol = body.substr(colon + 1);
    if (spec.module.empty() || spec.symbol.empty())
      return MakeError(Errc::kInvalidArgument,
                       option + " '" + text + "': MODULE:SYMBOL needs both (libc.so.6:write)");
  }
  return spec;
}

Result<ResolvedTrigger> ResolveTrigger(const TriggerSpec& spec, const std::string& exe_path,
                                       const std::vector<MapEntry>& maps) {
  if (spec.kind == TriggerSpec::Kind::kAddress) {
    const MapEntry* m = FindMapping(maps, spec.address);
    if (m == nullptr || !m->exec)
      return MakeError(Errc::kInvalidArgument, spec.option + " " + HexAddress(spec.address) +
                                                   " is not inside an executable mapping of the "
                                                   "target");
    return ResolvedTrigger{spec.address, HexAddress(spec.address) + " in " + m->path};
  }
  auto wanted = [&](const std::string& path) {
    if (spec.module.empty()) return true;
    const size_t slash = path.rfind('/');
    return path == spec.module ||
           (slash == std::string::npos ? path : path.substr(slash + 1)) == spec.module;
  };
  std::vector<std::string> candidates;
  if (wanted(exe_path)) candidates.push_back(exe_path);
  for (const MapEntry& m : maps)
    if (m.exec && m.is_file() && m.path != exe_path && wanted(m.path) &&
        std::find(candidates.begin(), candidates.end(), m.path) == candidates.end())
      candidates.push_back(m.path);
  if (candidates.empty())
    return MakeError(Errc::kNotFound, spec.option + " " + spec.text + ": no module " +
                                          spec.module + " is mapped in the target");
  std::string first_error;
  for (const std::string& path : candidates) {
    auto elf = ElfFile::Open(path);
    if (!elf) continue;
    auto sym = elf->FindSymbol(spec.symbol);
    if (!sym) {
      if (first_error.empty()) first_error = sym.error().message;
      continue;
    }
    PTSCOPE_ASSIGN_OR_RETURN(uint64_t address, PlaceInMaps(*elf, path, sym->value, maps));
    return ResolvedTrigger{address, spec.symbol + " in " + path};
  }
  return MakeError(Errc::kNotFound, spec.option + " " + spec.text + ": not found in the target (" +
                                        (first_error.empty() ? candidates.front() + " is unreadable"
                                                             : first_error) + ")");
}

const char* StimulusName(Stimulus stimulus) {
  switch (stimulus) {
    case Stimulus::kInterrupt: return "SIGINT";
    case Stimulus::kTerminate: return "SIGTERM";
    case Stimulus::kUsr2: return "SIGUSR2";
    case Stimulus::kTargetExit: return "target exit";
    case Stimulus::kDuration: return "--duration elapsed";
    case Stimulus::kTriggerHit: return "trigger hit";
    case Stimulus::kInstructionLimit: return "--max-instructions reached";
  }
  return "?";
}

TriggerAction TriggerPolicy::On(Stimulus stimulus) {
  TriggerAction action;
  switch (stimulus) {
    case Stimulus::kInterrupt:
    case Stimulus::kTerminate:
      action = {true, true, "signal"};
      break;
    case Stimulus::kUsr2:
      action = {true, false, "usr2"};
      break;
    case Stimulus::kDuration:
      action = {true, true, "duration"};
      break;
    case Stimulus::kInstructionLimit:
      action = {true, true, "max-instructions"};
      break;
    case Stimulus::kTargetExit:
      // With --multi-snapshot the trigger snapshots are the capture; a last one at exit would
      // only repeat their data.
      action = {!(multi_snapshot_ && trigger_hits_ > 0), true, "exit"};
      break;
    case Stimulus::kTriggerHit:
      ++trigger_hits_;
      action = {true, !multi_snapshot_, "trigger"};
      break;
  }
  if (!snapshot_mode_) action.snapshot = false;
  if (action.snapshot) ++snapshots_taken_;
  return action;
}

}  // namespace ptscope::record
