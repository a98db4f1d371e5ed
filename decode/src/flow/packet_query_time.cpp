// PacketQuery's clock (see packet_query.h) but for ApplyCyc (packet_query.cpp, on the hot path):
// the TSC, CBR, TMA and MTC arithmetic and the calibration that give every event and pt_qry_time
// its time. Written, as packet_query.cpp, from libipt 2.0.5's documented behaviour (pt_time.c:
// pt_time_update_tsc, _cbr, _tma, _mtc and pt_tcal_update_*) as the specification: the same
// rounding, the same order of updates.
#include <cstdint>

#include "flow/packet_query.h"

namespace ptscope::decode {

void PacketQuery::SetFcr(uint64_t fcr) {
  calibration_.fcr = fcr;
  if (fcr < calibration_.min_fcr) calibration_.min_fcr = fcr;
  if (fcr > calibration_.max_fcr) calibration_.max_fcr = fcr;
}

int PacketQuery::ApplyTsc(uint64_t tsc, bool header) {
  Calibration& cal = calibration_;
  const uint64_t last_tsc = cal.tsc, cycles = cal.cyc_tsc;
  cal.tsc = tsc;
  cal.cyc_tsc = 0;
  // In PSB+ a TSC calibrates from the cycles since the previous one, unless MTC does.
  if (header && last_tsc != 0 && cycles != 0 && !cal.have_mtc) {
    uint64_t now = tsc;
    bool ok = true;
    if (now < last_tsc) {
      now += uint64_t{1} << 56;
      ok = now >= last_tsc;
    }
    if (!ok) return -pte_bad_packet;
    const uint64_t delta = now - last_tsc;
    if ((delta & ~(~uint64_t{0} >> kFcrShift)) != 0) return -pte_internal;
    SetFcr((delta << kFcrShift) / cycles);
  }
  Clock& clock = clock_;
  clock.have_tsc = true;
  clock.have_tma = clock.have_mtc = false;
  clock.tsc = clock.base = tsc;
  clock.ctc = 0;
  clock.fc = 0;
  clock.lost_mtc = clock.lost_cyc = 0;
  return 0;
}

int PacketQuery::ApplyCbr(uint8_t ratio, bool header) {
  if (!header) {  // outside PSB+ the calibration starts over
    calibration_ = Calibration{};
  }
  if (nom_freq_ != 0) {
    if (ratio == 0) return -pte_bad_packet;
    SetFcr((uint64_t{nom_freq_} << kFcrShift) / ratio);
  }
  if (ratio == 0) return -pte_bad_packet;
  clock_.have_cbr = true;
  clock_.cbr = ratio;
  return 0;
}

int PacketQuery::ApplyTma(uint16_t ctc, uint16_t fc) {
  Clock& clock = clock_;
  if (!clock.have_tsc || clock.have_tma) return -pte_bad_context;
  if (clock.have_mtc) return -pte_internal;
  const uint32_t mtc_hi = mtc_freq_ + 8u;
  const uint32_t mask = (1u << mtc_hi) - 1u;
  clock.have_tma = true;
  clock.base -= fc;
  clock.fc += fc;
  // The TMA's 16 CTC bits cover the MTC's 8 bits at this frequency: the next MTC needs no guess.
  if (mtc_hi <= 16) clock.have_mtc = true;
  clock.ctc = clock.ctc_cyc = ctc & mask;
  return 0;
}

int PacketQuery::ApplyMtc(uint8_t payload) {
  // Calibration first (pt_tcal_update_mtc): the cycles between two MTCs give the ratio.
  {
    Calibration& cal = calibration_;
    const uint32_t last_ctc = cal.ctc;
    const bool had_mtc = cal.have_mtc;
    const uint64_t cycles = cal.cyc_mtc;
    const bool check_skl168 = cal.check_skl168;
    cal.check_skl168 = false;
    const uint32_t ctc = static_cast<uint32_t>(payload) << mtc_freq_;
    if (!had_mtc) {
      cal.cyc_mtc = 0;
      cal.ctc = ctc;
      cal.have_mtc = true;
    } else if (cycles != 0) {
      cal.cyc_mtc = 0;
      cal.ctc = ctc;
      cal.lost_mtc += 1;
      uint32_t delta = 0;
      int status = CtcDelta(ctc, last_ctc, &delta);
      if (status < 0) return status;
      uint64_t fc = 0;
      status = CtcToFc(delta, &fc);
      if (status == 0) {
        if ((fc & ~(~uint64_t{0} >> kFcrShift)) != 0) return -pte_internal;
        const uint64_t fcr = (fc << kFcrShift) / cycles;
        bool skip = false;
        if (check_skl168) {
          // Erratum SKL168: the first MTC after a PSB may come late; a ratio from it is kept
          // only when it looks sane.
          if ((1u << mtc_freq_) < delta) skip = true;
          else if (mtc_freq_ < 10 && HaveFcr()) {
            const uint64_t expected = (cal.fcr * (cycles + 0xf00)) >> kFcrShift;
            if (expected < fc) skip = true;
          }
        }
        if (!skip) {
          SetFcr(fcr);
          cal.lost_mtc = 0;
        }
      } else if (status != -pte_bad_config) {
        return status;
      }
    }
  }
  // Then the time (pt_time_update_mtc).
  Clock& clock = clock_;
  const bool have_tsc = clock.have_tsc, have_tma = clock.have_tma, have_mtc = clock.have_mtc;
  if (have_tsc && !have_tma) return 0;
  uint64_t base = clock.base;
  uint32_t last_ctc = clock.ctc;
  const uint32_t ctc = static_cast<uint32_t>(payload) << mtc_freq_;
  if (clock.fc != 0 || clock.lost_cyc != 0 || !have_mtc) clock.ctc_cyc = ctc;
  clock.have_mtc = true;
  clock.fc = 0;
  clock.ctc = ctc;
  clock.lost_cyc = 0;
  if (!have_mtc) {
    // The first MTC after a TMA: the TMA's CTC bits above the MTC's complete this one.
    if (!have_tma) return 0;
    if ((last_ctc & ~0xffffu) != 0) return -pte_internal;
    const uint32_t ctc_lo = ctc & 0xffffu;
    uint32_t ctc_hi = ctc & ~0xffffu;
    if (ctc_lo < last_ctc) {
      ctc_hi -= 1u << 16;
      ctc_hi &= 0xffu << mtc_freq_;
    }
    last_ctc |= ctc_hi;
  }
  uint32_t delta = 0;
  if (CtcDelta(ctc, last_ctc, &delta) < 0) {
    clock.lost_mtc += 1;
    return -pte_bad_packet;
  }
  uint64_t fc = 0;
  const int status = CtcToFc(delta, &fc);
  if (status < 0) return status == -pte_bad_config ? 0 : status;
  base += fc;
  clock.tsc = clock.base = base;
  return 0;
}

}  // namespace ptscope::decode
