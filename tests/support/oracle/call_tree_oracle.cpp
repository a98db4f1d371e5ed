// call_tree_oracle: the call tree a user should see, built from a ground truth, not from the trace.
//
//   call_tree_oracle ARCHIVE.ptar GROUND_TRUTH PROGRAM [UNTRACED_EXITS]
//
// GROUND_TRUTH is the "TID 0xADDRESS" list of every instruction a thread retired (pt-emulate
// --ground-truth, pt-synth --ground-truth). Each instruction's bytes come from the file its
// MMAP2 record names (or the vdso blob) and are classified here with Zydis; each thread's
// successive addresses then say what happened (a call, a return, a jump, a signal), and a stack
// of frames follows it with the rules of DESIGN.md "Stack reconstruction", written anew from the
// rules, not from the StackTracker: nothing of pt-decode is shared but the archive reader.
//
// Frames are named by PROGRAM's sized function symbols (.symtab, demangled; aliases at one
// address as "a|b"); code elsewhere (other modules, PLT stubs, unsized symbols) is one anonymous
// kind of frame, kept on the stack but left out of the printed tree (its children are lifted), as
// tests/support/call_tree.py leaves such slices out of pt-decode's tree. Printed:
//   function NAME|ALIAS...      one line per named function (the names the comparison keeps)
//   thread TID                  then the thread's tree, two spaces of indentation per level
// A pt-synth walk leaves the traced code (TIP.PGD) and tracing resumes (TIP.PGE) elsewhere, where
// pt-emulate's programs never do. The ground truth does not show it (a return into untraced code,
// then the entry of another function, reads as one transfer), so pt-synth's --untraced-exits file,
// the fourth argument, says after which instruction each TIP.PGD came and its address. The model
// is what the trace says and what a reader of magic-trace or perf expects: the branch that left
// does what it does in traced code (a call into untraced code is a frame; a return goes to the
// TIP.PGD's address: to an open frame's return address, or revealing a caller above the first
// frame, or re-anchoring); where tracing resumes at a function's entry, the untraced code called
// it (a callback, an atexit handler, as magic-trace keeps its stack at a trace start): it nests
// under what was running, whose frames stay open, and its return to where the untraced code was
// closes it. (The walker itself starts over with an empty shadow stack there; nothing in the
// trace shows that, so no decoder can, and none should guess it.) Without that file, a return to
// a function's first byte starts a new tree and a direct branch that did not reach its target (a
// dead block) is an asynchronous entry.
// CALL_TREE_ORACLE_DEBUG=1 prints every transfer and the stack depth on stderr.
// Exit status: 0, or 1 with a message naming the file (and line) on bad input.
#include <Zydis/Zydis.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture_mappings.h"
#include "llvm/Demangle/Demangle.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "ptscope/capture.h"
#include "ptscope/format.h"

namespace {

using ptscope::oracle::Mapping;

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "call_tree_oracle: %s\n", message.c_str());
  std::exit(1);
}

// ---- the code: bytes by address ------------------------------------------------------------

class FileBytes {
 public:
  explicit FileBytes(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) Fail(path + ": cannot open (" + std::strerror(errno) + ")");
    size_ = static_cast<size_t>(st.st_size);
    void* data = size_ == 0 ? MAP_FAILED : mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) Fail(path + ": cannot map");
    data_ = static_cast<const uint8_t*>(data);
  }
  ~FileBytes() { munmap(const_cast<uint8_t*>(data_), size_); }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

struct Region {  // [addr, addr + len) of one address space, backed by bytes
  uint64_t addr = 0, len = 0;
  const uint8_t* bytes = nullptr;
};

// ---- instructions ---------------------------------------------------------------------------

enum class Kind : uint8_t { kOther, kCall, kReturn, kJump, kCondJump, kSyscall };
struct Insn {
  uint8_t size = 0;
  Kind kind = Kind::kOther;
  uint64_t target = 0;  // a relative (direct) kCall, kJump or kCondJump; 0: indirect
};

Insn Classify(const uint8_t* bytes, size_t available, uint64_t ip) {
  static ZydisDecoder decoder = [] {
    ZydisDecoder d;
    ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    return d;
  }();
  ZydisDecodedInstruction insn;
  if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&decoder, nullptr, bytes, available, &insn))) {
    char at[32];
    std::snprintf(at, sizeof at, "0x%" PRIx64, ip);
    Fail(std::string("cannot decode the instruction at ") + at);
  }
  Insn result;
  result.size = insn.length;
  switch (insn.meta.category) {
    case ZYDIS_CATEGORY_CALL: result.kind = Kind::kCall; break;
    case ZYDIS_CATEGORY_RET: result.kind = Kind::kReturn; break;
    case ZYDIS_CATEGORY_UNCOND_BR: result.kind = Kind::kJump; break;
    case ZYDIS_CATEGORY_COND_BR: result.kind = Kind::kCondJump; break;
    case ZYDIS_CATEGORY_SYSCALL: result.kind = Kind::kSyscall; break;
    default: break;
  }
  if ((result.kind == Kind::kCall || result.kind == Kind::kJump ||
       result.kind == Kind::kCondJump) && insn.raw.imm[0].is_relative) {
    result.target = ip + insn.length + static_cast<uint64_t>(insn.raw.imm[0].value.s);
  }
  return result;
}

// ---- the program's functions ----------------------------------------------------------------

struct Function {
  uint64_t start = 0, end = 0;  // link-time addresses
  std::string names;            // "a|b"
};

struct Program {
  std::vector<Function> functions;  // by start, disjoint
  // Link-time address of file offset `offset` (the PT_LOAD holding it), or false.
  std::vector<std::pair<uint64_t, uint64_t>> loads_offset_vaddr;
  std::vector<uint64_t> loads_filesz;
};

Program ReadProgram(const std::string& path) {
  auto binary = llvm::object::ObjectFile::createObjectFile(path);
  if (!binary) Fail(path + ": " + llvm::toString(binary.takeError()));
  const auto* elf = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(binary->getBinary());
  if (elf == nullptr) Fail(path + ": not a 64-bit little-endian ELF file");
  Program program;
  auto headers = elf->getELFFile().program_headers();
  if (!headers) Fail(path + ": program headers: " + llvm::toString(headers.takeError()));
  for (const auto& phdr : *headers) {
    if (phdr.p_type != llvm::ELF::PT_LOAD) continue;
    program.loads_offset_vaddr.emplace_back(phdr.p_offset, phdr.p_vaddr);
    program.loads_filesz.push_back(phdr.p_filesz);
  }
  std::map<std::pair<uint64_t, uint64_t>, std::vector<std::string>> by_range;
  for (const llvm::object::ELFSymbolRef& symbol : elf->symbols()) {
    if (symbol.getELFType() != llvm::ELF::STT_FUNC || symbol.getSize() == 0) continue;
    auto name = symbol.getName();
    auto value = symbol.getValue();
    if (!name || !value || name->empty()) {
      if (!name) llvm::consumeError(name.takeError());
      if (!value) llvm::consumeError(value.takeError());
      continue;
    }
    std::string text = llvm::demangle(name->str());
    auto& names = by_range[{*value, *value + symbol.getSize()}];
    if (std::find(names.begin(), names.end(), text) == names.end()) names.push_back(text);
  }
  for (auto& [range, names] : by_range) {
    std::sort(names.begin(), names.end());
    std::string joined;
    for (const std::string& n : names) joined += (joined.empty() ? "" : "|") + n;
    // A symbol inside another (a local label with a size) is left to the outer one.
    if (!program.functions.empty() && range.first < program.functions.back().end) continue;
    program.functions.push_back({range.first, range.second, joined});
  }
  return program;
}

// ---- the tree -------------------------------------------------------------------------------

constexpr int kOther = -1;  // code that is not one of the program's functions

struct Node {
  int function = kOther;
  std::vector<std::unique_ptr<Node>> children;
};

struct Frame {
  int function = kOther;
  uint64_t return_ip = 0;  // 0: unknown (an inferred bottom frame)
  uint64_t resume_ip = 0;  // a signal handler: where the interrupted code resumes
  Node* node = nullptr;
  bool entered = false;    // entered where tracing resumed: called by untraced code
};

class ThreadTree {
 public:
  std::vector<std::unique_ptr<Node>> roots;

  // The thread's first instruction: its function is the inferred bottom frame.
  void Start(int function) { PushRoot(function); }

  void Call(int callee, uint64_t return_ip) {
    Push(Frame{callee, return_ip, 0, nullptr});
  }

  // Control reached `to` (a function `to_function`, entry or not) by a return or jump.
  void Return(uint64_t to, int to_function, bool to_entry) {
    if (!stack_.empty() && stack_.back().return_ip == to) return PopTo(stack_.size() - 1);
    for (size_t i = stack_.size(); i-- > 0;) {
      if (stack_[i].return_ip == to) return PopTo(i);
    }
    if (LandInDeeperFrame(to_function)) return;
    if (to_entry) return Restart(to_function);  // no call returns to a function's first byte
    if (!stack_.empty() && (stack_.back().resume_ip != 0 || stack_.back().entered)) {
      // A handler returning to a trampoline (or code entered from untraced code returning into
      // other untraced code): it takes the frame's place until the interrupted code resumes.
      stack_.back().function = to_function;
      ReplaceTopNode(to_function);
      return;
    }
    if (stack_.size() == 1 && stack_[0].return_ip == 0) {  // returned above the first frame
      auto caller = std::make_unique<Node>();
      caller->function = to_function;
      for (size_t i = anchor_root_; i < roots.size(); ++i) {
        caller->children.push_back(std::move(roots[i]));
      }
      roots.resize(anchor_root_);
      roots.push_back(std::move(caller));
      stack_[0] = Frame{to_function, 0, 0, roots.back().get()};
      return;
    }
    Restart(to_function);  // nothing matches: start again from the target's function
  }

  // Control left the traced code and came back at `function` (pt-synth: a return past the
  // walk's first frame, then a new start): what was open closes, and a new tree begins.
  void Restart(int function) {
    stack_.clear();
    anchor_root_ = roots.size();
    PushRoot(function);
  }

  void Jump(uint64_t to, int to_function, bool to_entry) {
    if (stack_.empty()) return PushRoot(to_function);
    if (to_function == stack_.back().function) return;  // (its own entry too: a loop)
    if (!to_entry && LandInDeeperFrame(to_function)) return;
    stack_.back().function = to_function;  // a tail call, or into another function's body
    ReplaceTopNode(to_function);
  }

  // Control came back to a handler's resumption point, or left `resume_ip` for `to` without a
  // branch (a signal: the handler nests under the interrupted frame).
  void Async(uint64_t to, int to_function, uint64_t resume_ip) {
    for (size_t i = stack_.size(); i-- > 0;) {
      if (stack_[i].resume_ip == to) return PopTo(i);
    }
    Push(Frame{to_function, 0, resume_ip, nullptr});
  }

  // A pt-synth walk left the traced code (TIP.PGD) at a branch of kind `kind` for `to` (0: the
  // address was suppressed; `mapped`: `to` is code the capture maps, else untraced code nobody
  // can name). What the branch did is what it does in traced code: a call into untraced code is a
  // frame, a return unwinds (or reveals a caller, or re-anchors); a jump into unknown code
  // changes nothing, there being no function to replace the top with.
  void Leave(Kind kind, uint64_t to, int to_function, bool to_entry, bool mapped, uint64_t next) {
    if (to == 0) return;
    switch (kind) {
      case Kind::kCall: return Call(to_function, next);
      case Kind::kReturn: return Return(to, to_function, to_entry && mapped);
      case Kind::kJump:
      case Kind::kCondJump:
        if (mapped) Jump(to, to_function, to_entry);
        return;
      case Kind::kSyscall:
      case Kind::kOther: return;
    }
  }

  // Tracing resumed at `at` (in `function`) after a Leave that would have resumed at `resume`
  // (the TIP.PGD's address, or the syscall's next instruction). At an open frame's return
  // address: the untraced code returned there. Elsewhere: untraced code called `function` (a
  // callback, an atexit handler: it nests under what was running, whose frames stay open, as
  // magic-trace keeps its stack at a trace start), unless that is the function already on top.
  void Resume(uint64_t at, int function, uint64_t resume) {
    if (stack_.empty()) return PushRoot(function);
    for (size_t i = stack_.size(); i-- > 0;) {
      if (stack_[i].return_ip == at) {
        PopTo(i);
        if (stack_.empty()) PushRoot(function);
        return;
      }
    }
    if (at == resume) return;
    if (function != kOther && function == stack_.back().function) return;
    Frame frame{function, resume, 0, nullptr};
    frame.entered = true;
    Push(frame);
  }

  size_t depth() const { return stack_.size(); }

  bool IsResumption(uint64_t to) const {
    for (const Frame& frame : stack_) {
      if (frame.resume_ip == to) return true;
    }
    return false;
  }

 private:
  std::vector<Frame> stack_;
  size_t anchor_root_ = 0;

  void PushRoot(int function) {
    roots.push_back(std::make_unique<Node>());
    roots.back()->function = function;
    stack_.push_back(Frame{function, 0, 0, roots.back().get()});
  }
  void Push(Frame frame) {
    if (stack_.empty()) {
      PushRoot(frame.function);
      stack_.back() = Frame{frame.function, frame.return_ip, frame.resume_ip, roots.back().get()};
      return;
    }
    auto node = std::make_unique<Node>();
    node->function = frame.function;
    frame.node = node.get();
    stack_.back().node->children.push_back(std::move(node));
    stack_.push_back(frame);
  }
  void PopTo(size_t size) { stack_.resize(size); }
  // A transfer into the middle of a function deeper in the stack unwinds to it (longjmp,
  // exceptions). Nearest to the top wins.
  bool LandInDeeperFrame(int function) {
    if (function == kOther || stack_.size() < 2) return false;
    for (size_t i = stack_.size() - 1; i-- > 0;) {
      if (stack_[i].function == function) {
        PopTo(i + 1);
        return true;
      }
    }
    return false;
  }
  // The top frame's slice ends and another function's begins at the same depth.
  void ReplaceTopNode(int function) {
    auto node = std::make_unique<Node>();
    node->function = function;
    Node* raw = node.get();
    if (stack_.size() == 1) {
      roots.push_back(std::move(node));
    } else {
      stack_[stack_.size() - 2].node->children.push_back(std::move(node));
    }
    stack_.back().node = raw;
  }
};

void Print(const Node& node, const Program& program, int depth, std::string& out) {
  if (node.function != kOther) {
    out.append(static_cast<size_t>(2 * depth), ' ');
    out += program.functions[static_cast<size_t>(node.function)].names;
    out += '\n';
    ++depth;
  }
  for (const auto& child : node.children) Print(*child, program, depth, out);
}

// ---- the ground truth -----------------------------------------------------------------------

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

class AddressSpace {
 public:
  AddressSpace(const std::vector<Mapping>& mappings, const ptscope::format::Archive& archive,
               uint32_t pid, const std::string& program_path, const Program& program,
               std::map<std::string, std::unique_ptr<FileBytes>>& files)
      : program_(program) {
    for (const Mapping& m : mappings) {
      auto& file = files[m.path];
      if (!file) file = std::make_unique<FileBytes>(m.path);
      if (m.pgoff >= file->size()) continue;
      uint64_t len = std::min<uint64_t>(m.len, file->size() - m.pgoff);
      regions_.push_back(Region{m.addr, len, file->data() + m.pgoff});
      if (!SameFile(m.path, program_path)) continue;
      for (size_t i = 0; i < program.loads_offset_vaddr.size(); ++i) {
        auto [offset, vaddr] = program.loads_offset_vaddr[i];
        if (m.pgoff >= offset && m.pgoff < offset + program.loads_filesz[i]) {
          bias_ = m.addr - (vaddr + (m.pgoff - offset));
          have_bias_ = true;
        }
      }
    }
    for (const auto& blob : archive.blobs) {
      if (blob.kind != ptscope::format::BlobKind::kVdso || blob.data.empty()) continue;
      if (blob.pid != 0 && blob.pid != pid) continue;
      regions_.push_back(Region{blob.vaddr, blob.data.size(), blob.data.data()});
    }
  }

  const Insn& At(uint64_t ip) {
    auto [it, inserted] = insns_.try_emplace(ip);
    if (!inserted) return it->second;
    for (const Region& r : regions_) {
      if (ip < r.addr || ip >= r.addr + r.len) continue;
      it->second = Classify(r.bytes + (ip - r.addr), std::min<uint64_t>(15, r.addr + r.len - ip), ip);
      return it->second;
    }
    char at[64];
    std::snprintf(at, sizeof at, "0x%" PRIx64, ip);
    Fail(std::string("no recorded mapping holds the instruction at ") + at);
  }

  bool Maps(uint64_t ip) const {
    for (const Region& r : regions_) {
      if (ip >= r.addr && ip < r.addr + r.len) return true;
    }
    return false;
  }

  // The program's function holding `ip` (kOther if none); *entry: `ip` is its first byte.
  int FunctionAt(uint64_t ip, bool* entry) const {
    *entry = false;
    if (!have_bias_) return kOther;
    uint64_t link = ip - bias_;
    auto it = std::upper_bound(program_.functions.begin(), program_.functions.end(), link,
                               [](uint64_t a, const Function& f) { return a < f.start; });
    if (it == program_.functions.begin()) return kOther;
    --it;
    if (link >= it->end) return kOther;
    *entry = link == it->start;
    return static_cast<int>(it - program_.functions.begin());
  }

 private:
  const Program& program_;
  std::vector<Region> regions_;
  uint64_t bias_ = 0;
  bool have_bias_ = false;
  std::unordered_map<uint64_t, Insn> insns_;
};

// pt-synth --untraced-exits: `TID N 0xTARGET` per TIP.PGD, N the thread's instructions so far.
struct UntracedExit {
  uint64_t instructions = 0, target = 0;
};

struct ThreadState {
  AddressSpace* space = nullptr;
  ThreadTree tree;
  uint64_t last_ip = 0;
  bool started = false;
  uint64_t instructions = 0;             // ground-truth lines of the thread so far
  std::vector<UntracedExit> exits;       // in order
  size_t next_exit = 0;
};

void Step(ThreadState& t, uint64_t ip) {
  bool entry = false;
  const int function = t.space->FunctionAt(ip, &entry);
  ++t.instructions;
  // Did tracing stop after the previous instruction (then resume at `ip`)?
  const UntracedExit* left = nullptr;
  while (t.next_exit < t.exits.size() && t.exits[t.next_exit].instructions < t.instructions) {
    if (t.exits[t.next_exit].instructions + 1 == t.instructions) left = &t.exits[t.next_exit];
    ++t.next_exit;
  }
  if (!t.started) {
    t.started = true;
    t.tree.Start(function);
    t.last_ip = ip;
    return;
  }
  const uint64_t from = t.last_ip;
  t.last_ip = ip;
  if (ip == from) return;  // a rep-prefixed instruction's next iteration
  const Insn& insn = t.space->At(from);
  const uint64_t next = from + insn.size;
  static const bool debug = std::getenv("CALL_TREE_ORACLE_DEBUG") != nullptr;
  if (debug && (insn.kind != Kind::kOther || ip != next)) {
    std::fprintf(stderr, "%" PRIx64 " -> %" PRIx64 " kind %d depth %zu\n", from, ip,
                 static_cast<int>(insn.kind), t.tree.depth());
  }
  if (left != nullptr) {
    bool to_entry = false;
    const int to_function = t.space->FunctionAt(left->target, &to_entry);
    t.tree.Leave(insn.kind, left->target, to_function, to_entry, t.space->Maps(left->target),
                 next);
    return t.tree.Resume(ip, function, left->target != 0 ? left->target : next);
  }
  // A direct branch that did not reach its target: control went elsewhere (pt-synth without
  // --untraced-exits: a branch into a dead block, resumed at a new function).
  if (insn.target != 0 && ip != insn.target && (insn.kind != Kind::kCondJump || ip != next)) {
    return t.tree.Async(ip, function, next);
  }
  switch (insn.kind) {
    case Kind::kCall:
      if (t.tree.IsResumption(ip)) return t.tree.Async(ip, function, 0);
      return t.tree.Call(function, next);
    case Kind::kReturn:
      if (t.tree.IsResumption(ip)) return t.tree.Async(ip, function, 0);
      return t.tree.Return(ip, function, entry);
    case Kind::kJump:
      if (t.tree.IsResumption(ip)) return t.tree.Async(ip, function, 0);
      return t.tree.Jump(ip, function, entry);
    case Kind::kCondJump:
      if (ip == next) return;
      return t.tree.Jump(ip, function, entry);
    case Kind::kSyscall:
    case Kind::kOther:
      if (ip == next) return;
      return t.tree.Async(ip, function, next);  // a signal (or sigreturn resuming)
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr,
                 "usage: call_tree_oracle ARCHIVE.ptar GROUND_TRUTH PROGRAM [UNTRACED_EXITS]\n");
    return 2;
  }
  const std::string archive_path = argv[1], truth_path = argv[2], program_path = argv[3];
  auto archive = ptscope::format::OpenCapture(archive_path);
  if (!archive) Fail(archive.error().message);
  std::string error;
  ptscope::oracle::CaptureMappings mappings = ptscope::oracle::CollectMappings(*archive, &error);
  if (!error.empty()) Fail(archive_path + ": " + error);
  const Program program = ReadProgram(program_path);

  std::map<std::string, std::unique_ptr<FileBytes>> files;
  std::map<uint32_t, std::unique_ptr<AddressSpace>> spaces;  // by pid
  std::map<uint32_t, ThreadState> threads;                    // by tid
  if (argc == 5) {  // pt-synth --untraced-exits
    std::ifstream exits(argv[4]);
    if (!exits) Fail(std::string(argv[4]) + ": cannot open");
    std::string line;
    for (uint64_t number = 1; std::getline(exits, line); ++number) {
      unsigned tid = 0;
      UntracedExit exit;
      if (std::sscanf(line.c_str(), "%u %" SCNu64 " 0x%" SCNx64, &tid, &exit.instructions,
                      &exit.target) != 3) {
        Fail(std::string(argv[4]) + ":" + std::to_string(number) + ": not 'TID N 0xTARGET': " +
             line);
      }
      threads[tid].exits.push_back(exit);
    }
  }
  std::ifstream truth(truth_path);
  if (!truth) Fail(truth_path + ": cannot open");
  std::string line;
  for (uint64_t number = 1; std::getline(truth, line); ++number) {
    unsigned tid = 0;
    uint64_t ip = 0;
    if (std::sscanf(line.c_str(), "%u 0x%" SCNx64, &tid, &ip) != 2) {
      Fail(truth_path + ":" + std::to_string(number) + ": not 'TID 0xADDRESS': " + line);
    }
    ThreadState& thread = threads[tid];
    if (thread.space == nullptr) {
      auto pid = mappings.pid_of_tid.find(tid);
      const uint32_t p = pid == mappings.pid_of_tid.end() ? tid : pid->second;
      auto& space = spaces[p];
      if (!space) {
        space = std::make_unique<AddressSpace>(mappings.by_pid[p], *archive, p, program_path,
                                               program, files);
      }
      thread.space = space.get();
    }
    Step(thread, ip);
  }

  for (auto& [tid, thread] : threads) {  // a walk ends by leaving: what its last branch did
    if (!thread.started) continue;
    for (size_t i = thread.next_exit; i < thread.exits.size(); ++i) {
      if (thread.exits[i].instructions != thread.instructions) continue;
      const Insn& last = thread.space->At(thread.last_ip);
      bool to_entry = false;
      const uint64_t to = thread.exits[i].target;
      const int to_function = thread.space->FunctionAt(to, &to_entry);
      thread.tree.Leave(last.kind, to, to_function, to_entry, thread.space->Maps(to),
                        thread.last_ip + last.size);
    }
  }
  std::string out;
  for (const Function& f : program.functions) out += "function " + f.names + "\n";
  for (const auto& [tid, thread] : threads) {
    out += "thread " + std::to_string(tid) + "\n";
    for (const auto& root : thread.tree.roots) Print(*root, program, 0, out);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
