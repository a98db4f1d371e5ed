// Lazy unit plan (see unit_planner.h).
#include "parallel/unit_planner.h"

#include <algorithm>
#include <utility>

#include "parallel/unit_cursor.h"

namespace ptscope::decode {

struct UnitPlanner::StreamState {
  size_t stream = 0;
  size_t piece = 0;                          // the piece `cursor` walks
  size_t unit = 0;                           // index of the next unit within it
  std::unique_ptr<PieceUnitCursor> cursor;   // null between pieces
  std::optional<DecodeUnitSpan> ahead;       // the piece's next unit, already cut
  uint64_t piece_covered = 0;                // bytes of the piece counted in planned_bytes_
  uint64_t start_ns = 0;
  WorkUnit head;                             // valid after Advance returned true
  // A piece that could not be read to its end: the failure, its piece and unit index, handed
  // out as a unit of its own after the units before it.
  std::string unreadable;
  size_t unreadable_piece = 0, unreadable_unit = 0;
};

UnitPlanner::UnitPlanner(std::vector<Stream>& streams, const DecoderSetup& setup,
                         const pt_config& config, size_t unit_bytes,
                         const std::string& archive_path, uint64_t window_from_ns,
                         uint64_t window_to_ns)
    : streams_(streams),
      setup_(setup),
      config_(config),
      unit_bytes_(unit_bytes),
      window_from_ns_(window_from_ns),
      window_to_ns_(window_to_ns),
      reader_(archive_path),
      planned_(streams.size(), false) {
  for (const Stream& stream : streams) {
    for (const Piece& piece : stream.pieces) total_bytes_ += piece.size;
  }
}

UnitPlanner::~UnitPlanner() = default;

std::optional<DecodeUnitSpan> UnitPlanner::Pull(StreamState& state) {
  Result<std::optional<DecodeUnitSpan>> unit = state.cursor->Next();
  if (unit) return *unit;
  state.unreadable = "cannot read the trace: " + unit.error().message +
                     "; the rest of this piece of trace is not decoded";
  state.unreadable_piece = state.piece;
  state.unreadable_unit = state.unit;
  streams_[state.stream].pieces[state.piece].has_psb = true;  // the failure says what happened
  return std::nullopt;
}

void UnitPlanner::EndPiece(StreamState& state) {
  const Piece& piece = streams_[state.stream].pieces[state.piece];
  planned_bytes_ += piece.size - std::min<uint64_t>(piece.size, state.piece_covered);
  state.piece_covered = 0;
  state.cursor.reset();
  state.ahead.reset();
  ++state.piece;
}

bool UnitPlanner::Advance(StreamState& state) {
  Stream& stream = streams_[state.stream];
  for (;;) {
    if (!state.unreadable.empty()) {
      WorkUnit& work = state.head;
      work.stream = state.stream;
      work.piece = state.unreadable_piece;
      work.unit = state.unreadable_unit;
      work.span = DecodeUnitSpan{};
      work.has_next = false;
      work.next_start = PsbState{};
      work.per_cpu = stream.cpu >= 0;
      work.start_ns = state.start_ns;
      work.planned_bytes = planned_bytes_;
      work.bytes = {};
      work.unreadable = std::move(state.unreadable);
      state.unreadable.clear();
      return true;
    }
    if (state.cursor == nullptr) {
      if (state.piece >= stream.pieces.size()) return false;
      Piece& piece = stream.pieces[state.piece];
      state.cursor = std::make_unique<PieceUnitCursor>(reader_, piece, config_, unit_bytes_);
      state.unit = 0;
      state.ahead = Pull(state);
      if (!state.ahead) {
        EndPiece(state);
        continue;
      }
      piece.has_psb = true;
    }
    const Piece& piece = stream.pieces[state.piece];
    WorkUnit& work = state.head;  // filled in place: its storage keeps its capacity
    work.stream = state.stream;
    work.piece = state.piece;
    work.unit = state.unit++;
    work.span = *state.ahead;
    work.per_cpu = stream.cpu >= 0;
    work.unreadable.clear();
    // The bytes now: the cursor keeps them only until its next unit is cut.
    std::span<const uint8_t> bytes = state.cursor->Bytes(work.span);
    if (piece.in_memory()) {
      work.bytes = bytes;
    } else {
      work.storage.assign(bytes.begin(), bytes.end());
      work.bytes = work.storage;
    }
    state.ahead = Pull(state);
    work.has_next = state.ahead.has_value();
    work.next_start = work.has_next ? state.ahead->start : PsbState{};
    const uint64_t unit_bytes = work.span.end - work.span.begin;
    planned_bytes_ += unit_bytes;
    state.piece_covered += unit_bytes;
    work.planned_bytes = planned_bytes_;
    if (!work.has_next) EndPiece(state);
    const uint64_t start_tsc = work.span.start.tsc;
    if (start_tsc != 0) state.start_ns = std::max(state.start_ns, setup_.time.ToNs(start_tsc));
    work.start_ns = state.start_ns;
    // Outside the window: it starts after its end, or the next unit starts before its
    // beginning. Without time, keep everything.
    if (start_tsc != 0 && setup_.time.ToNs(start_tsc) > window_to_ns_) continue;
    if (work.has_next && work.next_start.tsc != 0 &&
        setup_.time.ToNs(work.next_start.tsc) < window_from_ns_) {
      continue;
    }
    return true;
  }
}

bool UnitPlanner::Produce(WorkUnit* out) {
  for (; thread_stream_ < streams_.size() && !merging_; ++thread_stream_) {
    if (streams_[thread_stream_].cpu >= 0) continue;
    if (thread_state_ == nullptr || thread_state_->stream != thread_stream_) {
      thread_state_ = std::make_unique<StreamState>();
      thread_state_->stream = thread_stream_;
    }
    if (Advance(*thread_state_)) {
      std::swap(*out, thread_state_->head);
      planned_[out->stream] = true;
      return true;
    }
  }
  if (!merging_) {
    merging_ = true;
    thread_state_.reset();
    for (size_t s = 0; s < streams_.size(); ++s) {
      if (streams_[s].cpu < 0) continue;
      auto state = std::make_unique<StreamState>();
      state->stream = s;
      if (Advance(*state)) cpu_states_.push_back(std::move(state));
    }
  }
  // The earliest head; on equal times the first stream (cpu_states_ is in stream order).
  size_t best = cpu_states_.size();
  for (size_t i = 0; i < cpu_states_.size(); ++i) {
    if (best == cpu_states_.size() ||
        cpu_states_[i]->head.start_ns < cpu_states_[best]->head.start_ns) {
      best = i;
    }
  }
  if (best == cpu_states_.size()) return false;
  StreamState& state = *cpu_states_[best];
  std::swap(*out, state.head);
  planned_[out->stream] = true;
  if (!Advance(state)) cpu_states_.erase(cpu_states_.begin() + static_cast<ptrdiff_t>(best));
  return true;
}

bool UnitPlanner::Next(WorkUnit* out) {
  if (!have_pending_) {
    have_pending_ = Produce(&pending_);
    if (!have_pending_) return false;
  }
  std::swap(*out, pending_);  // storage goes round: no allocation per unit
  have_pending_ = Produce(&pending_);
  out->following_start_ns = have_pending_ ? pending_.start_ns : UINT64_MAX;
  return true;
}

uint64_t CaptureStartNs(const std::vector<Stream>& streams, const DecoderSetup& setup,
                        const pt_config& config, const std::string& archive_path) {
  uint64_t start_ns = UINT64_MAX;
  PieceReader reader(archive_path);
  for (const Stream& stream : streams) {
    for (const Piece& piece : stream.pieces) {
      // The unit size does not matter here: the first unit starts at the first accepted PSB.
      PieceUnitCursor cursor(reader, piece, config, 1);
      Result<std::optional<DecodeUnitSpan>> first = cursor.Next();
      if (first && *first && (*first)->start.tsc != 0) {
        start_ns = std::min(start_ns, setup.time.ToNs((*first)->start.tsc));
      }
    }
  }
  return start_ns == UINT64_MAX ? 0 : start_ns;
}

}  // namespace ptscope::decode
