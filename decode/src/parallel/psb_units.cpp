// PSB scan and PSB+ parsing (see psb_units.h).
#include "parallel/psb_units.h"

#include <cstring>

namespace ptscope::decode {
namespace {

constexpr uint8_t kPsb[16] = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                              0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82};
// A PSB+ header is a handful of packets; a header longer than this is damaged.
constexpr int kMaxHeaderPackets = 64;

uint64_t IpFromPsbFup(const pt_packet_ip& ip) {
  // After a PSB the last IP is zero, so every compression is relative to zero.
  switch (ip.ipc) {
    case pt_ipc_update_16: return ip.ip & 0xffffull;
    case pt_ipc_update_32: return ip.ip & 0xffffffffull;
    case pt_ipc_update_48: return ip.ip & 0xffffffffffffull;
    case pt_ipc_sext_48: {
      uint64_t low = ip.ip & 0xffffffffffffull;
      return (low & (1ull << 47)) != 0 ? low | 0xffff000000000000ull : low;
    }
    case pt_ipc_full: return ip.ip;
    default: return 0;
  }
}

}  // namespace

size_t FindPsb(const uint8_t* bytes, size_t size, size_t from) {
  const uint8_t* at = bytes + from;
  const uint8_t* end = bytes + size;
  while (end - at >= static_cast<ptrdiff_t>(sizeof kPsb)) {
    // Every PSB byte pair is 02 82: look for 0x82 and check the aligned window around it.
    const void* hit = std::memchr(at + 1, 0x82, static_cast<size_t>(end - at - 1));
    if (hit == nullptr) break;
    const uint8_t* start = static_cast<const uint8_t*>(hit) - 1;
    if (end - start >= static_cast<ptrdiff_t>(sizeof kPsb) &&
        std::memcmp(start, kPsb, sizeof kPsb) == 0) {
      // A run of 02 82 longer than a PSB (a payload ending in 02 82 just before it) holds the
      // PSB in its last 16 bytes: nothing after a PSB starts with 02 82.
      while (end - start >= static_cast<ptrdiff_t>(sizeof kPsb) + 2 &&
             std::memcmp(start + 2, kPsb, sizeof kPsb) == 0) {
        start += 2;
      }
      return static_cast<size_t>(start - bytes);
    }
    at = start + 2;
  }
  return size;
}

PsbState ReadPsbState(const uint8_t* bytes, size_t size, const pt_config& config, size_t offset) {
  PsbState state;
  pt_config local = config;
  local.begin = const_cast<uint8_t*>(bytes);
  local.end = const_cast<uint8_t*>(bytes) + size;
  pt_packet_decoder* decoder = pt_pkt_alloc_decoder(&local);
  if (decoder == nullptr) return state;
  pt_packet first;
  if (pt_pkt_sync_set(decoder, offset) >= 0 && pt_pkt_next(decoder, &first, sizeof first) >= 0 &&
      first.type == ppt_psb) {
    state.valid = true;
    for (int i = 0; i < kMaxHeaderPackets; ++i) {
      pt_packet packet;
      if (pt_pkt_next(decoder, &packet, sizeof packet) < 0) break;
      if (packet.type == ppt_psbend || packet.type == ppt_ovf) {
        uint64_t after = 0;
        if (pt_pkt_get_offset(decoder, &after) >= 0) state.header_end = after;
        break;
      }
      if (packet.type == ppt_tsc) state.tsc = packet.payload.tsc.tsc;
      if (packet.type == ppt_fup && packet.payload.ip.ipc != pt_ipc_suppressed) {
        state.ip = IpFromPsbFup(packet.payload.ip);
        state.has_ip = true;
      }
    }
  }
  pt_pkt_free_decoder(decoder);
  return state;
}

void ScanPsbs(const uint8_t* bytes, size_t size, size_t base, size_t owned_end,
              const pt_config& config, size_t* from, std::vector<PsbMark>* marks) {
  size_t at = *from > base ? *from - base : 0;
  for (;;) {
    size_t psb = FindPsb(bytes, size, at);
    if (psb >= size || base + psb >= owned_end) return;  // the next window goes on from *from
    PsbMark mark{base + psb, ReadPsbState(bytes, size, config, psb)};
    // 0 (no PSBEND read) stays 0: a piece offset would point before the PSB itself.
    if (mark.state.header_end != 0) mark.state.header_end += base;
    marks->push_back(mark);
    at = psb + sizeof kPsb;
    *from = base + at;
  }
}

}  // namespace ptscope::decode
