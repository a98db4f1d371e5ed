// The structs passed between decode stages. Only decode/src/pipeline.cpp wires the stages:
//
//   ArchiveReader ─► SidebandTimeline ─► FlowDecoder (QueryWalker or libipt's block decoder) ─► FlowEvent stream
//   (one per thread) ─► StackTracker ─► SliceEvent calls on a SliceSink (Perfetto | text | folded)
//
// FlowEvents carry addresses and trace-clock nanoseconds only: no names, no text. Names are
// attached at the sink through a FrameNamer, once per distinct address; the stages before it ask
// CodeFacts (function starts, inlined depths), never for names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptscope/decode.h"

namespace ptscope::symbols {
struct InlineDepthSpan;
}

namespace ptscope::decode {

// Identifies a traced thread.
struct ThreadKey {
  uint32_t pid = 0;
  uint32_t tid = 0;
  bool operator==(const ThreadKey&) const = default;
};

// GapCause (why trace is missing at a kGap) is public: ptscope/decode.h.

// The text of a rare event (gap, trigger): one pointer in every FlowEvent instead of a 32-byte
// std::string (events are written by the workers and read by the consumer: their size is memory
// traffic). The text itself lives in a process-wide store, never freed before exit, so that a
// FlowEvent is trivially copyable and destructible: a unit's buffer of events (about 1 MB) is
// reused without a destructor pass over it, which cost a full extra read of the buffer per unit.
// Only gaps and triggers have text, and equal texts are stored once (an overflow's sentence, a
// trigger's), so the store stays small; distinct texts (a decode error names its offset) add one
// entry each.
class EventText {
 public:
  EventText() = default;
  EventText& operator=(std::string text);  // stores `text` (thread-safe)
  bool empty() const { return text_ == nullptr; }
  const std::string& str() const {
    static const std::string kEmpty;
    return text_ != nullptr ? *text_ : kEmpty;
  }

 private:
  const std::string* text_ = nullptr;
};

// One control-flow fact that can change a call stack, in program order per thread.
struct FlowEvent {
  enum class Kind : uint8_t {
    kCall,         // from = call insn, to = target, from + call_size = address after the call
    kReturn,       // from = ret insn, to = where it returned
    kJump,         // unconditional/indirect jump (may be a tail call; the tracker decides)
    kSyscall,      // from = syscall insn; tracing leaves user space until the next kEnable
    kDisable,      // tracing stopped for another reason (exit to untraced code), from = last ip
    kEnable,       // tracing (re)starts at `to`
    kAsync,        // asynchronous transfer (signal/interrupt delivery): from = interrupted ip,
                   // to = handler; the handler nests under the interrupted frame
    kGap,          // trace lost: close every open slice at `time_ns`; `to` = resume ip if known
    kTrigger,      // a trigger hit / marker (to = address, detail = text)
    kEnd,          // end of this thread's trace (snapshot end / thread exit)
    kInlineChange, // the inlined chain changes at from = to (first insn of the new chain), without
                   // a branch; inline_depth = the chain's new depth (0: the function's own code).
                   // Emitted only when CodeFacts were given to the FlowDecoder.
  };
  Kind kind = Kind::kCall;
  GapCause gap_cause = GapCause::kDecodeError;  // for kGap
  // For kCall: the call instruction's length (its return address is return_ip()). A length, not
  // the address, so that it fits beside the small fields: 48 bytes in all, and every unit's
  // events are written, timed and read again by the stack tracker.
  uint8_t call_size = 0;
  uint32_t inline_depth = 0;  // for kInlineChange
  uint64_t time_ns = 0;    // trace clock, nanoseconds
  uint64_t from = 0;
  uint64_t to = 0;
  uint64_t insn_count = 0; // instructions retired since the previous FlowEvent of this thread
  EventText detail;        // for kGap / kTrigger: human text (rare events only)

  uint64_t return_ip() const { return from + call_size; }  // for kCall
};
static_assert(sizeof(FlowEvent) == 48, "FlowEvent is on the hot path: keep it small");
static_assert(std::is_trivially_destructible_v<FlowEvent>, "a unit's events are dropped without a pass");

// What a slice stands for. A sink turns it into a name once per distinct value.
// Fields in this order keep it at 16 bytes (and a SliceRecord at 32): held-back slice records are
// most of a long decode's memory.
struct FrameId {
  enum class Kind : uint8_t { kFunction, kSyscall, kUntraced, kGap, kTrigger, kFolded, kInlined };
  uint64_t address = 0;  // for kFunction: an address inside the function (its entry when known)
  uint32_t inline_index = 0;  // for kInlined: index into FrameName::inlined (outermost = 0)
  // kInlined (added by the stack tracker): a function inlined at call site `address`; its name is
  // FrameNamer::Name(pid, address, t).inlined[inline_index].
  Kind kind = Kind::kFunction;
  bool operator==(const FrameId&) const = default;
};
static_assert(sizeof(FrameId) == 16);

// Resolves addresses to what a person reads. Implemented over the symbols library.
struct FrameName {
  std::string name;           // demangled function name, or "libfoo.so+0x1a2b", or "0x7f..."
  std::string file;           // source file, may be empty
  uint32_t line = 0;
  std::string module;         // module path, may be empty
  bool symbolized = false;    // a real symbol was found
  // Inlined frames active at `address`, outermost first (each nested inside `name`).
  struct Inlined {
    std::string name;
    std::string file;
    uint32_t line = 0;
  };
  std::vector<Inlined> inlined;
};

// Runtime addresses [begin, end) over which InlineDepth(a) == DepthAt(a); empty when unknown.
struct InlineDepthStretch {
  uint64_t begin = 0, end = 0;
  uint64_t bias = 0;  // runtime address - the span's vaddr (mod 2^64)
  std::shared_ptr<const symbols::InlineDepthSpan> span;
  // One depth over the whole stretch (code without debug info, functions without inlining):
  // answered without reading the span.
  bool uniform = false;
  uint32_t uniform_depth = 0;
  bool Contains(uint64_t address) const { return address >= begin && address < end; }
  uint32_t DepthAt(uint64_t address) const;
  // Whether the depth changes anywhere in (from, to] (both inside the stretch).
  bool ChangesIn(uint64_t from, uint64_t to) const;
};

// What the flow decoder and the stack tracker need to know about code, by address: where
// functions start and how deep inlined code is. No names: the stages that build stacks deal in
// addresses and FrameIds; text is the sinks' (FrameNamer, below). Implemented over the symbols
// library (names/frame_namer.h); thread-safe there.
class CodeFacts {
 public:
  virtual ~CodeFacts() = default;
  // Entry address of the function containing `address`, or 0 when unknown (pid selects the
  // address space; time_ns the mappings in force). Used to tell a tail call (jump to another
  // function's entry) from a jump inside a function.
  virtual uint64_t FunctionStart(uint32_t pid, uint64_t address, uint64_t time_ns) = 0;
  // The function FunctionStart finds for `address`, as [start, end): every address in it has the
  // same FunctionStart (end may be short of the function's end where only its start is known;
  // {0, 0}: unknown, or the end is not). The flow decoder carries it to tell, without a question
  // per branch, which conditional branches leave the current function. By default: {0, 0} (no
  // conditional branch makes an event).
  virtual std::pair<uint64_t, uint64_t> FunctionRange(uint32_t pid, uint64_t address,
                                                      uint64_t time_ns) {
    (void)pid, (void)address, (void)time_ns;
    return {0, 0};
  }
  // How many inlined frames are active at `address` (FrameNamer::Name(...).inlined.size()).
  virtual uint32_t InlineDepth(uint32_t pid, uint64_t address, uint64_t time_ns) = 0;
  // A stretch of code around `address` whose depths (those InlineDepth would give) are known at
  // once: a block inside it needs no question per instruction. Default: none (ask per address).
  virtual InlineDepthStretch InlineStretch(uint32_t pid, uint64_t address, uint64_t time_ns) {
    (void)pid, (void)address, (void)time_ns;
    return {};
  }
  // Whether `address` is where a process starts: the entry point (e_entry) of the file mapped
  // there, which a process runs first when that file is its program or its interpreter. A
  // thread whose trace starts there has no caller (stack/stack_tracker.h, Buffering). Default:
  // no address is.
  virtual bool IsProgramEntry(uint32_t pid, uint64_t address, uint64_t time_ns) {
    (void)pid, (void)address, (void)time_ns;
    return false;
  }
  // Whether `address` lies in a named function (for the summary's symbolized share), and the
  // range [*start, *end) around it for which the answer holds ([address, address + 1) outside
  // every mapping).
  virtual bool InNamedCode(uint32_t pid, uint64_t address, uint64_t time_ns, uint64_t* start,
                           uint64_t* end) {
    (void)pid, (void)time_ns;
    *start = address;
    *end = address + 1;
    return false;
  }
};

// Names for what a person reads: used by the sinks only (through FrameNameCache).
class FrameNamer {
 public:
  virtual ~FrameNamer() = default;
  // Name for the function that contains `address` (pid selects the address space; time_ns the
  // mappings in force). Called once per distinct (pid, function) by caching callers.
  virtual FrameName Name(uint32_t pid, uint64_t address, uint64_t time_ns) = 0;
};

// One slice event in a run handed to SliceSink::WriteRecords: what Begin/End/Instant carry, plus
// the thread's retired-instruction count at that point (for per-function instruction totals).
struct SliceRecord {
  enum class Type : uint8_t { kBegin, kEnd, kInstant };
  uint64_t time_ns = 0;
  uint64_t instructions = 0;          // retired by the thread up to here (differences matter)
  // kBegin: the slice's frame (kEnd: the frame it closes, which sinks do not read). A kInstant
  // has no frame: its text pointer is kept in frame.address (text(), SetText()), so that a record
  // is 32 bytes, two to a cache line, instead of 40 with a pointer of its own: held-back records
  // are most of a long decode's memory and of the stages' memory traffic after the walk (each is
  // written and read back once). [[no_unique_address]] lets type and inferred sit in FrameId's
  // tail padding.
  [[no_unique_address]] FrameId frame;
  Type type = Type::kBegin;
  bool inferred = false;              // kBegin

  // kInstant: its text (null: none), valid during the call only.
  const std::string* text() const {
    return reinterpret_cast<const std::string*>(static_cast<uintptr_t>(frame.address));
  }
  // Makes `text` the record's text (a kInstant's); its frame is then none. Field by field: a
  // whole FrameId must not be stored over type and inferred.
  void SetText(const std::string* text) {
    frame.address = reinterpret_cast<uintptr_t>(text);
    frame.inline_index = 0;
    frame.kind = FrameId::Kind::kFunction;
  }
};
static_assert(sizeof(SliceRecord) == 32, "SliceRecord is on the hot path: keep it small");
static_assert(sizeof(uintptr_t) <= sizeof(uint64_t));

// Output of the StackTracker. Timestamps are non-decreasing per thread.
class SliceSink {
 public:
  virtual ~SliceSink() = default;
  virtual void BeginThread(const ThreadKey& thread, const std::string& process_name,
                           const std::string& thread_name) = 0;
  // Opens a slice nested in the currently open ones of this thread.
  virtual void Begin(const ThreadKey& thread, uint64_t time_ns, const FrameId& frame,
                     bool inferred) = 0;
  // Closes the innermost open slice of this thread.
  virtual void End(const ThreadKey& thread, uint64_t time_ns) = 0;
  // A zero-duration marker (gap cause, trigger hit, folded recursion note).
  virtual void Instant(const ThreadKey& thread, uint64_t time_ns, const std::string& text) = 0;
  // A run of one thread's events, in order: the same as calling Begin/End/Instant for each (which
  // is what this default does). The StackTracker writes through here, so that a sink can take its
  // lock and find the thread once per run instead of once per slice.
  virtual void WriteRecords(const ThreadKey& thread, const SliceRecord* records, size_t count) {
    for (const SliceRecord* r = records; r != records + count; ++r) {
      switch (r->type) {
        case SliceRecord::Type::kBegin: Begin(thread, r->time_ns, r->frame, r->inferred); break;
        case SliceRecord::Type::kEnd: End(thread, r->time_ns); break;
        case SliceRecord::Type::kInstant: Instant(thread, r->time_ns, *r->text()); break;
      }
    }
  }
  // True when the sink needs every nesting level (per-function totals): the StackTracker then
  // emits all levels instead of folding those past its max_depth.
  virtual bool WantsEveryLevel() const { return false; }
  // The decode's totals (instructions, gaps, missing modules), given once just before Finish;
  // the JSON summary writes them, the other sinks have no place for them.
  virtual void SetCaptureTotals(const DecodeSummary&) {}
  // Called once after all threads are done.
  virtual void Finish() = 0;
  // After Finish: empty when every byte reached the output, else a one-line message naming the
  // file and what failed (added by the sinks; sinks never print).
  virtual std::string OutputError() const { return {}; }
};

}  // namespace ptscope::decode
