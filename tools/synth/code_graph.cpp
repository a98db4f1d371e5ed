#include "code_graph.h"

#include <Zydis/Zydis.h>

#include <algorithm>

namespace ptscope::synth {
namespace {

constexpr uint32_t kMaxBlockInstructions = 1u << 16;

const ZydisDecoder& Decoder() {
  static const ZydisDecoder decoder = [] {
    ZydisDecoder d;
    ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    return d;
  }();
  return decoder;
}

bool Decode1(const ElfCode& elf, uint64_t ip, ZydisDecodedInstruction* insn) {
  uint64_t available = 0;
  const uint8_t* bytes = elf.CodeAt(ip, &available);
  if (bytes == nullptr) return false;
  ZydisDecoderContext context;
  return ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&Decoder(), &context, bytes,
                                                    std::min<uint64_t>(available, 15), insn));
}

// Instructions a walk must never execute: they fault, stop the CPU or leave user mode in ways
// a user-only trace would not show as a plain syscall.
bool IsDeadEnd(const ZydisDecodedInstruction& insn) {
  switch (insn.mnemonic) {
    case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1:
    case ZYDIS_MNEMONIC_INTO: case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1:
    case ZYDIS_MNEMONIC_UD2: case ZYDIS_MNEMONIC_HLT: case ZYDIS_MNEMONIC_IRET:
    case ZYDIS_MNEMONIC_IRETD: case ZYDIS_MNEMONIC_IRETQ: case ZYDIS_MNEMONIC_SYSRET:
    case ZYDIS_MNEMONIC_SYSEXIT: case ZYDIS_MNEMONIC_XBEGIN: case ZYDIS_MNEMONIC_XABORT:
      return true;
    default:
      return insn.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR ||
             insn.meta.category == ZYDIS_CATEGORY_INTERRUPT ||
             insn.meta.category == ZYDIS_CATEGORY_SYSRET;
  }
}

// The block end an instruction makes, or nullopt-like kDead+false for a plain instruction.
bool Terminator(const ZydisDecodedInstruction& insn, uint64_t ip, BlockEnd* end, uint64_t* target) {
  if (IsDeadEnd(insn)) {
    *end = BlockEnd::kDead;
    return true;
  }
  const bool relative = insn.raw.imm[0].is_relative;
  if (relative) *target = ip + insn.length + static_cast<uint64_t>(insn.raw.imm[0].value.s);
  switch (insn.meta.category) {
    case ZYDIS_CATEGORY_COND_BR:
      *end = relative ? BlockEnd::kCondBranch : BlockEnd::kDead;
      return true;
    case ZYDIS_CATEGORY_UNCOND_BR:
      *end = relative                                                    ? BlockEnd::kJump
             : (insn.attributes & ZYDIS_ATTRIB_HAS_MODRM) != 0 && insn.raw.modrm.mod == 0 &&
                       insn.raw.modrm.rm == 5                            ? BlockEnd::kImportJump
                                                                         : BlockEnd::kIndirectJump;
      return true;
    case ZYDIS_CATEGORY_CALL:
      *end = relative ? BlockEnd::kCall : BlockEnd::kIndirectCall;
      return true;
    case ZYDIS_CATEGORY_RET:
      *end = insn.mnemonic == ZYDIS_MNEMONIC_RET ? BlockEnd::kReturn : BlockEnd::kDead;
      return true;
    case ZYDIS_CATEGORY_SYSCALL:
      *end = BlockEnd::kSyscall;
      return true;
    default:
      return false;
  }
}

}  // namespace

CodeGraph::CodeGraph(const ElfCode& elf) : elf_(elf) {}

Block CodeGraph::Decode(uint64_t ip) {
  Block b;
  b.start = ip;
  b.first_size = static_cast<uint32_t>(sizes_.size());
  ZydisDecodedInstruction insn;
  while (b.instructions < kMaxBlockInstructions) {
    if (!Decode1(elf_, ip, &insn)) {
      b.end = BlockEnd::kDead;
      break;
    }
    sizes_.push_back(insn.length);
    ++b.instructions;
    b.end_ip = ip;
    ip += insn.length;
    b.fallthrough = ip;
    if (Terminator(insn, b.end_ip, &b.end, &b.target)) break;
  }
  if (b.instructions == kMaxBlockInstructions) b.end = BlockEnd::kDead;
  // `jmp` back into its own block is a loop without packets: a decoder could never tell where
  // the walk left it, so a walk must not enter it.
  if (b.end == BlockEnd::kJump && b.target >= b.start && b.target <= b.end_ip) b.end = BlockEnd::kDead;
  // A direct call/jmp out of the code (`call 0` to an undefined weak symbol, guarded by a check
  // that never lets it run) is never taken: perf cannot follow it to a TIP.PGD as libipt can.
  uint64_t available = 0;
  if ((b.end == BlockEnd::kCall || b.end == BlockEnd::kJump) && elf_.CodeAt(b.target, &available) == nullptr) {
    b.end = BlockEnd::kDead;
  }
  return b;
}

int32_t CodeGraph::BlockAt(uint64_t ip) {
  auto [it, inserted] = by_start_.try_emplace(ip, kNoBlock);
  if (!inserted) return it->second;
  Block b = Decode(ip);
  if (b.end == BlockEnd::kDead) {
    sizes_.resize(b.first_size);
    return kNoBlock;
  }
  blocks_.push_back(b);
  it->second = static_cast<int32_t>(blocks_.size() - 1);
  return it->second;
}

int32_t CodeGraph::Target(int32_t index) {
  if (block(index).target_block == kUnresolved) {
    const int32_t resolved = BlockAt(block(index).target);
    block(index).target_block = resolved;
  }
  return block(index).target_block;
}

int32_t CodeGraph::Fallthrough(int32_t index) {
  if (block(index).fallthrough_block == kUnresolved) {
    const int32_t resolved = BlockAt(block(index).fallthrough);
    block(index).fallthrough_block = resolved;
  }
  return block(index).fallthrough_block;
}

void CodeGraph::CollectEntries(size_t max_blocks) {
  std::vector<uint64_t> candidates = elf_.function_entries;
  ZydisDecodedInstruction insn;
  for (const CodeRange& range : elf_.code) {
    for (uint64_t ip = range.start; ip < range.start + range.size;) {
      if (!Decode1(elf_, ip, &insn)) {
        ++ip;
        continue;
      }
      if (insn.meta.category == ZYDIS_CATEGORY_CALL && insn.raw.imm[0].is_relative) {
        candidates.push_back(ip + insn.length + static_cast<uint64_t>(insn.raw.imm[0].value.s));
      }
      ip += insn.length;
    }
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  entries_.clear();
  for (uint64_t ip : candidates) {
    const int32_t b = BlockAt(ip);
    if (b >= 0) entries_.push_back(b);
  }
  ExpandFromEntries(max_blocks);
  ComputeReturnCosts();
}

void CodeGraph::ExpandFromEntries(size_t max_blocks) {
  std::vector<int32_t> work(entries_.begin(), entries_.end());
  std::vector<bool> seen(blocks_.size(), false);
  while (!work.empty() && blocks_.size() < max_blocks) {
    const int32_t index = work.back();
    work.pop_back();
    if (static_cast<size_t>(index) < seen.size() && seen[static_cast<size_t>(index)]) continue;
    if (seen.size() < blocks_.size()) seen.resize(blocks_.size(), false);
    seen[static_cast<size_t>(index)] = true;
    const BlockEnd end = block(index).end;
    if (end == BlockEnd::kCondBranch || end == BlockEnd::kJump || end == BlockEnd::kCall) {
      const int32_t t = Target(index);
      if (t >= 0) work.push_back(t);
    }
    if (end == BlockEnd::kCondBranch || end == BlockEnd::kCall || end == BlockEnd::kIndirectCall ||
        end == BlockEnd::kSyscall) {
      const int32_t f = Fallthrough(index);
      if (f >= 0) work.push_back(f);
    }
  }
}

uint32_t CodeGraph::CostOf(const Block& b) const {
  auto cost = [this](int32_t i) { return i >= 0 ? blocks_[static_cast<size_t>(i)].return_cost : kNoReturn; };
  const uint64_t own = b.instructions;
  uint64_t rest = kNoReturn;
  switch (b.end) {
    case BlockEnd::kReturn: case BlockEnd::kImportJump: rest = 0; break;
    case BlockEnd::kCondBranch: rest = std::min(cost(b.target_block), cost(b.fallthrough_block)); break;
    case BlockEnd::kJump: rest = cost(b.target_block); break;
    case BlockEnd::kCall: rest = uint64_t{cost(b.target_block)} + cost(b.fallthrough_block) + 8; break;
    case BlockEnd::kIndirectCall: rest = uint64_t{cost(b.fallthrough_block)} + 64; break;
    case BlockEnd::kSyscall: rest = uint64_t{cost(b.fallthrough_block)} + 8; break;
    case BlockEnd::kIndirectJump: rest = 1024; break;
    case BlockEnd::kDead: break;
  }
  return static_cast<uint32_t>(std::min<uint64_t>(own + rest, kNoReturn));
}

// Shortest "distance to a return" by repeated relaxation; blocks were discovered roughly
// callers-first, so sweeping from the last one converges in a few passes.
void CodeGraph::ComputeReturnCosts() {
  for (Block& b : blocks_) b.return_cost = kNoReturn;
  for (int pass = 0; pass < 64; ++pass) {
    bool changed = false;
    for (size_t i = blocks_.size(); i-- > 0;) {
      const uint32_t cost = CostOf(blocks_[i]);
      if (cost < blocks_[i].return_cost) {
        blocks_[i].return_cost = cost;
        changed = true;
      }
    }
    if (!changed) break;
  }
}

}  // namespace ptscope::synth
