// Packet lengths and layouts from the Intel SDM vol. 3C, 33.4.2; IP compression from 33.4.2.2.
#include "pt_packet_scan.h"

#include <cstdio>
#include <string>

namespace ptscope::record {
namespace {

using Kind = PtControlEvent::Kind;

std::string At(uint64_t offset, const char* what) {
  char text[96];
  std::snprintf(text, sizeof text, "PT byte offset %llu: %s",
                static_cast<unsigned long long>(offset), what);
  return text;
}

// Length of an extended (0x02-led) packet from its second byte; 0 for an unknown one.
size_t ExtendedLength(uint8_t second) {
  switch (second) {
    case 0xa3: return 8;   // long TNT
    case 0x43: return 8;   // PIP
    case 0x83: return 2;   // TraceStop
    case 0x03: return 4;   // CBR
    case 0xc8: return 7;   // VMCS
    case 0xf3: return 2;   // OVF
    case 0x82: return 16;  // PSB
    case 0x23: return 2;   // PSBEND
    case 0xc3: return 11;  // MNT
    case 0x73: return 7;   // TMA
    case 0x62: case 0xe2: return 2;  // EXSTOP
    case 0xc2: return 10;  // MWAIT
    case 0x22: return 4;   // PWRE
    case 0xa2: return 7;   // PWRX
    case 0x33: case 0xb3: return 2;  // BEP
    case 0x13: return 4;   // CFE
    case 0x53: return 11;  // EVD
    default: break;
  }
  if ((second & 0x1f) == 0x12) return (second & 0x60) == 0 ? 6 : (second & 0x60) == 0x20 ? 10 : 0;
  return 0;  // PTW with a reserved size, BBP/BIP (event tracing, never enabled by pt-record)
}

// The IP of a TIP-family packet or FUP: IPBytes (bits 7:5) say which part of the last IP the
// payload replaces. Returns the payload length, or -1 for a reserved IPBytes.
int UpdateIp(uint8_t ip_bytes, const uint8_t* payload, uint64_t& last_ip,
             std::optional<uint64_t>& ip) {
  auto read = [payload](int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | payload[i];
    return v;
  };
  switch (ip_bytes) {
    case 0: ip.reset(); return 0;  // suppressed; last IP unchanged
    case 1: last_ip = (last_ip & ~uint64_t{0xffff}) | read(2); ip = last_ip; return 2;
    case 2: last_ip = (last_ip & ~uint64_t{0xffffffff}) | read(4); ip = last_ip; return 4;
    case 3: {
      uint64_t v = read(6);
      if (v & (uint64_t{1} << 47)) v |= ~uint64_t{0} << 48;
      last_ip = v;
      ip = v;
      return 6;
    }
    case 4: last_ip = (last_ip & ~uint64_t{0xffffffffffff}) | read(6); ip = last_ip; return 6;
    case 6: last_ip = read(8); ip = last_ip; return 8;
    default: return -1;
  }
}

int IpPayloadLength(uint8_t ip_bytes) {
  static constexpr int kLength[8] = {0, 2, 4, 6, 6, -1, 8, -1};
  return kLength[ip_bytes & 7];
}

}  // namespace

Status ScanPtPackets(std::span<const uint8_t> bytes,
                     const std::function<void(const PtControlEvent&)>& on_event) {
  uint64_t last_ip = 0;
  bool in_psb_plus = false;
  size_t pos = 0;
  auto need = [&](size_t length) -> Status {
    if (pos + length > bytes.size())
      return MakeError(Errc::kTruncated, At(pos, "the stream ends inside a packet"));
    return Ok();
  };
  while (pos < bytes.size()) {
    const uint8_t b = bytes[pos];
    PtControlEvent event;
    event.offset = pos;
    event.in_psb_plus = in_psb_plus;
    if (b == 0x00) {  // PAD
      ++pos;
    } else if (b == 0x02) {
      PTSCOPE_TRY(need(2));
      const uint8_t second = bytes[pos + 1];
      const size_t length = ExtendedLength(second);
      if (length == 0) return MakeError(Errc::kCorrupt, At(pos, "an unknown extended packet"));
      PTSCOPE_TRY(need(length));
      if (second == 0xa3) {  // long TNT: 47 bits at most below the stop bit, oldest highest
        uint64_t payload = 0;
        for (int i = 7; i >= 2; --i) payload = (payload << 8) | bytes[pos + i];
        if (payload == 0) return MakeError(Errc::kCorrupt, At(pos, "a long TNT without stop bit"));
        int stop = 63 - __builtin_clzll(payload);
        for (int bit = stop - 1; bit >= 0; --bit) {
          event.kind = Kind::kTnt;
          event.taken = (payload >> bit) & 1;
          on_event(event);
        }
      } else if (second == 0xf3) {
        event.kind = Kind::kOvf;
        on_event(event);
      } else if (second == 0x82) {
        static constexpr uint8_t kPsb[2] = {0x02, 0x82};
        for (size_t i = 0; i < 16; i += 2)
          if (bytes[pos + i] != kPsb[0] || bytes[pos + i + 1] != kPsb[1])
            return MakeError(Errc::kCorrupt, At(pos, "a broken PSB"));
        last_ip = 0;
        in_psb_plus = true;
        event.kind = Kind::kPsb;
        on_event(event);
      } else if (second == 0x23) {
        in_psb_plus = false;
      }
      pos += length;
    } else if ((b & 1) == 0) {  // short TNT: up to 6 bits below the stop bit, oldest highest
      int stop = 31 - __builtin_clz(b);
      for (int bit = stop - 1; bit >= 1; --bit) {
        event.kind = Kind::kTnt;
        event.taken = (b >> bit) & 1;
        on_event(event);
      }
      ++pos;
    } else if ((b & 3) == 3) {  // CYC: more bytes while the Exp/continue bit is set
      bool more = (b & 4) != 0;
      ++pos;
      while (more) {
        PTSCOPE_TRY(need(1));
        more = (bytes[pos++] & 1) != 0;
      }
    } else if (b == 0x19) {  // TSC
      PTSCOPE_TRY(need(8));
      pos += 8;
    } else if (b == 0x59 || b == 0x99) {  // MTC, MODE
      PTSCOPE_TRY(need(2));
      pos += 2;
    } else {
      const uint8_t low = b & 0x1f;
      if (low == 0x0d) event.kind = Kind::kTip;
      else if (low == 0x11) event.kind = Kind::kTipPge;
      else if (low == 0x01) event.kind = Kind::kTipPgd;
      else if (low == 0x1d) event.kind = Kind::kFup;
      else return MakeError(Errc::kCorrupt, At(pos, "no PT packet starts with this byte"));
      const int length = IpPayloadLength(b >> 5);
      if (length < 0) return MakeError(Errc::kCorrupt, At(pos, "a reserved IPBytes value"));
      PTSCOPE_TRY(need(1 + length));
      UpdateIp(b >> 5, &bytes[pos + 1], last_ip, event.ip);
      on_event(event);
      pos += 1 + length;
    }
  }
  return Ok();
}

}  // namespace ptscope::record
