// Everything a PT decoder needs from the archive's metadata: the libipt pt_config fields (cpu,
// errata, timing parameters) and the TSC -> perf-time conversion.
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <string>

#include "ptscope/format.h"
#include "ptscope/result.h"

namespace ptscope::decode {

// ns = time_zero + ((tsc * time_mult) >> time_shift), computed as perf does (no overflow).
struct TscConversion {
  uint16_t shift = 0;
  uint32_t mult = 0;
  uint64_t zero = 0;
  bool identity = true;  // no conversion recorded: TSC values are taken as nanoseconds

  uint64_t ToNs(uint64_t tsc) const {
    if (identity) return tsc;
    uint64_t quot = tsc >> shift;
    uint64_t rem = tsc & ((uint64_t{1} << shift) - 1);
    return zero + quot * mult + ((rem * mult) >> shift);
  }
};

struct DecoderSetup {
  pt_cpu cpu{};                // zeroed for emulated captures (spec behaviour)
  pt_errata errata{};
  uint32_t cpuid_0x15_eax = 0, cpuid_0x15_ebx = 0;
  uint8_t mtc_freq = 0, nom_freq = 0;
  TscConversion time;
  bool emulated = false;
  std::string cpu_note;        // e.g. "unknown Intel model 0xc5: using the errata of ..."

  // Fills the config fields of `config` (begin/end are left to the caller).
  void Apply(pt_config& config) const;
};

// Offset of the first PSB packet that starts after `after` (or at 0 when `after` is UINT64_MAX),
// or -1. Used to resync after a decode error without skipping a PSB that libipt's look-ahead
// already read past.
int64_t FindNextPsb(const uint8_t* begin, size_t size, uint64_t after);

// Reads the metadata keys (FORMAT.md "Metadata keys"). Errors name the bad key and value.
Result<DecoderSetup> SetupFromMetadata(const format::Archive& archive);

}  // namespace ptscope::decode
