// perf's TSC <-> perf time conversion (perf_event_mmap_page time_shift/time_mult/time_zero; the
// archive's time.shift/time.mult/time.zero metadata). The one implementation shared by the
// recorders, the emulator, the decoder and the perf.data export. Header-only: pt-record links
// format statically and the decoder calls TscToNs on every timing packet.
#pragma once

#include <cstdint>

namespace ptscope::perf {

// ns = zero + ((tsc * mult) >> shift), computed as the kernel documents it for
// perf_event_mmap_page: split at `shift` so that no intermediate product overflows 64 bits
// (the naive tsc * mult does once tsc exceeds 2^64 / mult: seconds of uptime for a GHz TSC).
// Callers keep shift <= 63: format::ParseTimeConversion, which every reader of an archive or a
// perf.data goes through, refuses larger values (a shift by 64 is undefined behaviour).
struct PerfTime {
  uint16_t shift = 0;
  uint32_t mult = 0;
  uint64_t zero = 0;

  constexpr uint64_t TscToNs(uint64_t tsc) const {
    const uint64_t quot = tsc >> shift;
    const uint64_t rem = tsc & ((uint64_t{1} << shift) - 1);
    return zero + quot * mult + ((rem * mult) >> shift);
  }

  // The inverse, rounded down: floor((ns - zero) * 2^shift / mult), exact for every shift <= 63
  // (in 128 bits), clamped to the largest TSC; a time before `zero` maps to TSC 0. Needs
  // mult != 0.
  constexpr uint64_t NsToTsc(uint64_t ns) const {
    const uint64_t since_zero = ns >= zero ? ns - zero : 0;
    const unsigned __int128 tsc = (static_cast<unsigned __int128>(since_zero) << shift) / mult;
    return tsc > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(tsc);
  }
};

}  // namespace ptscope::perf
