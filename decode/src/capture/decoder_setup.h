// Everything a PT decoder needs from the archive's metadata: the libipt pt_config fields (cpu,
// errata, timing parameters) and the TSC -> perf-time conversion.
#pragma once

#include <intel-pt.h>

#include <cstdint>
#include <string>

#include "ptscope/format.h"
#include "ptscope/perf_time.h"
#include "ptscope/result.h"

namespace ptscope::decode {

// ns = time_zero + ((tsc * time_mult) >> time_shift), computed as perf does (perf_time.h).
struct TscConversion : perf::PerfTime {
  bool identity = true;  // no conversion recorded: TSC values are taken as nanoseconds

  uint64_t ToNs(uint64_t tsc) const { return identity ? tsc : TscToNs(tsc); }
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

// Where to resync after a decode error, given the decoder's current offset `current` and the
// PSB it last synced at (`last_sync`, UINT64_MAX for none): libipt reads a few packets ahead, so
// a PSB that starts just before `current` (within a PSB+ header) has not been decoded yet and is
// the right place; otherwise the first PSB after `current`. Returns -1 when there is none. The
// result is always after `last_sync`, so resyncing makes progress.
int64_t ResyncOffset(const uint8_t* begin, size_t size, uint64_t current, uint64_t last_sync);

// Reads the metadata keys (FORMAT.md "Metadata keys"). Errors name the bad key and value.
Result<DecoderSetup> SetupFromMetadata(const format::Archive& archive);

}  // namespace ptscope::decode
