// pt_config from archive metadata, with our own errata table for CPUs libipt 2.0.5 does not know.
#include "capture/decoder_setup.h"

#include <cstring>

namespace ptscope::decode {
namespace {

Result<uint64_t> ParseNumber(const format::Archive& archive, std::string_view key,
                             uint64_t fallback) {
  PTSCOPE_ASSIGN_OR_RETURN(std::optional<uint64_t> value,
                           format::MetadataNumber(archive.metadata, key, archive.path));
  return value.value_or(fallback);
}

// Intel family-6 models newer than libipt 2.0.5's table. They share the erratum set of the
// 66/7d/7e/8c/8d/a7/a8 row (bdm70, skl014, skd022), which libipt HEAD also applies to them.
bool ApplyOwnErrata(const pt_cpu& cpu, pt_errata& errata) {
  if (cpu.family != 6) return false;
  switch (cpu.model) {
    case 0xaa: case 0xac: case 0xad: case 0xae: case 0xb5: case 0xb7: case 0xba: case 0xbe:
    case 0xc5: case 0xc6: case 0xcf: case 0xbd:
      errata.bdm70 = 1;
      errata.skl014 = 1;
      errata.skd022 = 1;
      return true;
    default:
      return false;
  }
}

}  // namespace

namespace {

constexpr uint8_t kPsb[16] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                              0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82};
constexpr uint64_t kLookAhead = 64;  // longer than any PSB+ header libipt reads ahead through

bool IsPsbAt(const uint8_t* begin, size_t size, uint64_t at) {
  return at + sizeof kPsb <= size && begin[at] == 0x02 &&
         std::memcmp(begin + at, kPsb, sizeof kPsb) == 0;
}

}  // namespace

int64_t ResyncOffset(const uint8_t* begin, size_t size, uint64_t current, uint64_t last_sync) {
  uint64_t floor = last_sync == UINT64_MAX ? 0 : last_sync + 1;
  uint64_t from = current > kLookAhead ? current - kLookAhead : 0;
  if (from < floor) from = floor;
  for (uint64_t at = from; at + sizeof kPsb <= size; ++at) {
    if (IsPsbAt(begin, size, at)) return static_cast<int64_t>(at);
  }
  return -1;
}

void DecoderSetup::Apply(pt_config& config) const {
  config.cpu = cpu;
  config.errata = errata;
  config.cpuid_0x15_eax = cpuid_0x15_eax;
  config.cpuid_0x15_ebx = cpuid_0x15_ebx;
  config.mtc_freq = mtc_freq;
  config.nom_freq = nom_freq;
}

Result<DecoderSetup> SetupFromMetadata(const format::Archive& archive) {
  DecoderSetup setup;
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t emulated, ParseNumber(archive, "capture.emulated", 0));
  setup.emulated = emulated != 0 || (archive.header.features & format::kFeatureEmulated) != 0;
  if (!setup.emulated && archive.Get("cpu.vendor").value_or("") == "GenuineIntel") {
    PTSCOPE_ASSIGN_OR_RETURN(uint64_t family, ParseNumber(archive, "cpu.family", 0));
    PTSCOPE_ASSIGN_OR_RETURN(uint64_t model, ParseNumber(archive, "cpu.model", 0));
    PTSCOPE_ASSIGN_OR_RETURN(uint64_t stepping, ParseNumber(archive, "cpu.stepping", 0));
    setup.cpu.vendor = pcv_intel;
    setup.cpu.family = static_cast<uint16_t>(family);
    setup.cpu.model = static_cast<uint8_t>(model);
    setup.cpu.stepping = static_cast<uint8_t>(stepping);
    if (pt_cpu_errata(&setup.errata, &setup.cpu) < 0) {
      std::memset(&setup.errata, 0, sizeof setup.errata);
      if (!ApplyOwnErrata(setup.cpu, setup.errata)) {
        setup.cpu_note = "CPU family " + std::to_string(family) + " model " +
                         std::to_string(model) + " is unknown to libipt: decoding without errata";
      }
    }
  }
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t eax, ParseNumber(archive, "pt.cpuid15_eax", 0));
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t ebx, ParseNumber(archive, "pt.cpuid15_ebx", 0));
  setup.cpuid_0x15_eax = static_cast<uint32_t>(eax);
  setup.cpuid_0x15_ebx = static_cast<uint32_t>(ebx);
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t pt_config, ParseNumber(archive, "pt.config", 0));
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t mtc_period,
                           ParseNumber(archive, "pt.mtc_period", (pt_config >> 14) & 0xf));
  setup.mtc_freq = static_cast<uint8_t>(mtc_period & 0xf);
  PTSCOPE_ASSIGN_OR_RETURN(uint64_t nom_freq, ParseNumber(archive, "pt.max_nonturbo_ratio", 0));
  setup.nom_freq = static_cast<uint8_t>(nom_freq);
  // Checked where the archive or perf.data was read (format::ParseTimeConversion).
  if (archive.time) setup.time = TscConversion{archive.time->perf, false};
  return setup;
}

}  // namespace ptscope::decode
