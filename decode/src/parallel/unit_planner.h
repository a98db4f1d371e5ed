// UnitPlanner: the decode units of a capture in the order the pipeline consumes them, found while
// earlier units are decoded (issue #8). Each piece is split at PSBs by a PieceUnitCursor as the
// workers ask for units, so memory holds a few windows of PT and the units in flight, whatever
// the length of the capture, and decoding starts at once instead of after a pass over all of it.
//
// Order: every per-thread stream's units, stream by stream, piece by piece; then the per-CPU
// streams' units merged by start time (their PSB's time, never below an earlier unit of the same
// stream), ties in stream order, so that each thread's runs can be delivered as the units are
// consumed (cpu_threads.h). --time-range drops units that lie outside the window: those that start
// after its end, and those whose piece's next unit starts before its beginning.
#pragma once

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "capture/decoder_setup.h"
#include "capture/piece_reader.h"
#include "capture/streams.h"
#include "work_unit.h"

namespace ptscope::decode {

class UnitPlanner {
 public:
  // `streams` and `setup` must outlive the planner; it sets Piece::has_psb as it goes.
  UnitPlanner(std::vector<Stream>& streams, const DecoderSetup& setup, const pt_config& config,
              size_t unit_bytes, const std::string& archive_path, uint64_t window_from_ns,
              uint64_t window_to_ns);
  ~UnitPlanner();
  UnitPlanner(const UnitPlanner&) = delete;
  UnitPlanner& operator=(const UnitPlanner&) = delete;

  // The next unit in consumption order into *out (whose storage it reuses); false after the last.
  bool Next(WorkUnit* out);

  uint64_t total_bytes() const { return total_bytes_; }
  // Whether any unit of stream `s` was planned (after --time-range).
  bool planned(size_t s) const { return planned_[s]; }

 private:
  struct StreamState;
  // The stream's next unit inside the window into state.head; false when it has no more.
  bool Advance(StreamState& state);
  std::optional<DecodeUnitSpan> Pull(StreamState& state);
  void EndPiece(StreamState& state);
  // The next unit in plan order, without following_start_ns.
  bool Produce(WorkUnit* out);

  std::vector<Stream>& streams_;
  const DecoderSetup& setup_;
  const pt_config config_;
  const size_t unit_bytes_;
  const uint64_t window_from_ns_, window_to_ns_;
  PieceReader reader_;
  uint64_t total_bytes_ = 0;
  uint64_t planned_bytes_ = 0;
  std::vector<bool> planned_;
  size_t thread_stream_ = 0;                        // per-thread streams go first, in order
  std::unique_ptr<StreamState> thread_state_;
  bool merging_ = false;                            // per-CPU streams, once those are done
  std::vector<std::unique_ptr<StreamState>> cpu_states_;
  bool have_pending_ = false;                       // one unit ahead, for following_start_ns
  WorkUnit pending_;
};

// The time of a capture's first PSB with a TSC, in ns (0 when none has one): what --time-range
// counts from. Reads each piece up to its first unit.
uint64_t CaptureStartNs(const std::vector<Stream>& streams, const DecoderSetup& setup,
                        const pt_config& config, const std::string& archive_path);

}  // namespace ptscope::decode
