// Splitting a PT stream into decode units at PSB boundaries (issue #8).
//
// PT restarts its compression state at every PSB (last IP, return compression), and the PSB+
// header states where execution is (FUP) and what time it is (TSC). So the bytes from one PSB to
// the next can be decoded by a decoder of their own, in any order, on any thread. Units group
// consecutive PSB segments until they reach a target size; the boundaries depend only on the
// bytes and the target, never on the number of threads, so every --jobs value decodes the same
// units and produces the same output.
#pragma once

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "work_unit.h"  // PsbState, DecodeUnitSpan

namespace ptscope::decode {

// A PSB pattern in a piece, and what libipt reads there (state.valid false: the pattern is part
// of a payload). state.header_end is a piece offset too.
struct PsbMark {
  size_t offset = 0;
  PsbState state;
};

// The PSB patterns of a window of a piece: `bytes` holds piece offsets [base, base + size). Finds
// the chain FindPsb would walk over the whole piece (each search resumes 16 bytes after the last
// pattern) from piece offset *from on, appends the patterns that start before `owned_end` to
// `marks`, and leaves *from where the chain continues. Over consecutive windows whose owned parts
// tile the piece and that reach 64 KiB past their owned part (or to the piece's end), the marks
// are those of one window holding the whole piece: only a PSB+ header or a run of 02 82 longer
// than that, i.e. damage, could read differently.
void ScanPsbs(const uint8_t* bytes, size_t size, size_t base, size_t owned_end,
              const pt_config& config, size_t* from, std::vector<PsbMark>* marks);
constexpr size_t kPsbWindowReach = 64 * 1024;

// Offset of the first PSB at or after `from`, or `size` when there is none (memchr-speed scan).
size_t FindPsb(const uint8_t* bytes, size_t size, size_t from);

// Parses the PSB+ header at `offset` (a PSB) with libipt's packet decoder.
PsbState ReadPsbState(const uint8_t* bytes, size_t size, const pt_config& config, size_t offset);

}  // namespace ptscope::decode
