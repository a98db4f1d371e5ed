// A minimal Intel PT packet scanner for pt-record's --selftest: pt-record links no decoder
// (libipt lives in decode/), yet the first run on a new PT host must check what the hardware
// wrote. The scanner knows every packet's length (Intel SDM vol. 3C, 33.4.2 "Packet Definitions")
// and reports only what shows control flow: TNT bits, TIP, TIP.PGE, TIP.PGD, FUP with their
// reconstructed IPs (last-IP compression, reset at PSB), OVF and PSB. It does not decode
// instructions: a caller who knows the code compares the events with what that code must do.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "ptscope/result.h"

namespace ptscope::record {

struct PtControlEvent {
  enum class Kind { kTnt, kTip, kTipPge, kTipPgd, kFup, kOvf, kPsb } kind = Kind::kTnt;
  bool taken = false;           // kTnt: the branch's outcome
  std::optional<uint64_t> ip;   // TIP family and FUP: the target IP, unless suppressed
  bool in_psb_plus = false;     // between PSB and PSBEND (a FUP there is state, not flow)
  uint64_t offset = 0;          // of the packet in the scanned bytes
};

// Calls `on_event` for each event in stream order. A byte sequence that is no PT packet, or a
// packet cut by the end of `bytes`, is an error naming the offset and the byte.
Status ScanPtPackets(std::span<const uint8_t> bytes,
                     const std::function<void(const PtControlEvent&)>& on_event);

}  // namespace ptscope::record
