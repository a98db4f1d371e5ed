// Genuine Intel PT packet bytes for tests that need a PT stream without a PT encoder: PSB+ (PSB,
// TSC, MODE.Exec, PSBEND), then TNT-8 and TIP packets, repeated.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace ptscope::record::testing {

inline std::vector<uint8_t> MakePtStream(size_t bytes, uint8_t first_tsc = 1) {
  std::vector<uint8_t> s;
  uint8_t tsc = first_tsc;
  while (s.size() < bytes) {
    for (int i = 0; i < 8; ++i) s.insert(s.end(), {0x02, 0x82});          // PSB
    s.insert(s.end(), {0x19, tsc++, 0x22, 0x33, 0x44, 0x55, 0x66, 0x00});  // TSC
    s.insert(s.end(), {0x99, 0x01});                                       // MODE.Exec 64-bit
    s.insert(s.end(), {0x02, 0x23});                                       // PSBEND
    for (int i = 0; i < 40; ++i) {
      s.insert(s.end(), {0x0a, 0x06});                                     // TNT-8 x2
      s.insert(s.end(), {0x4d, 0x10, static_cast<uint8_t>(i), 0x40, 0x00});  // TIP update-32
    }
  }
  s.resize(bytes);
  return s;
}

inline size_t FirstPsb(const std::vector<uint8_t>& bytes) {
  static const uint8_t kPsb[16] = {2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
                                   2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82};
  for (size_t i = 0; i + 16 <= bytes.size(); ++i)
    if (std::memcmp(&bytes[i], kPsb, 16) == 0) return i;
  return bytes.size();
}

}  // namespace ptscope::record::testing
