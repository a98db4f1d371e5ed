// Exact packet bytes of tools/ptgen's encoder (pt-synth's and pt-emulate's) as pt-synth drives
// it, for short, hand-checked sequences (expected bytes written from the Intel SDM packet
// layouts, not produced by the encoder).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "pt_packet_encoder.h"

namespace {

using ptscope::ptgen::PacketSink;
using ptscope::ptgen::EncoderConfig;
using ptscope::ptgen::PtPacketEncoder;
using ptscope::ptgen::Timing;
using Bytes = std::vector<uint8_t>;

class VectorSink : public PacketSink {
 public:
  void Append(const uint8_t* bytes, size_t size) override { data.insert(data.end(), bytes, bytes + size); }
  Bytes data;
};

const Bytes kPsb = {0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
                    0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82};
const Bytes kCbr10 = {0x02, 0x03, 0x0a, 0x00};
const Bytes kModeExec64 = {0x99, 0x01};
const Bytes kPsbEnd = {0x02, 0x23};

Bytes Cat(std::initializer_list<Bytes> parts) {
  Bytes all;
  for (const Bytes& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

EncoderConfig Untimed() {
  EncoderConfig o;
  o.timing = Timing::kNone;
  o.psb_period = 4096;
  return o;
}

// PSB+ (no FUP: tracing is off), then MODE.Exec and TIP.PGE(0x401000) as sext-48.
const Bytes kEnableAt401000 = Cat({kPsb, kCbr10, kModeExec64, kPsbEnd, kModeExec64,
                                   {0x71, 0x00, 0x10, 0x40, 0x00, 0x00, 0x00}});

}  // namespace

TEST_CASE("enable, TNT packed oldest-first, flushed before a TIP") {
  VectorSink sink;
  PtPacketEncoder enc(Untimed(), &sink);
  enc.Enable(0x401000, 1000);
  enc.CondBranch(true, 1001);
  enc.CondBranch(true, 1002);
  enc.CondBranch(false, 1003);
  enc.CondBranch(true, 1004);
  enc.IndirectBranch(0x402345, 1005);  // same upper 48 bits as last-IP: update-16
  enc.Disable(0, true, 1006);          // TIP.PGD, IP suppressed
  // TNT-8 T,T,N,T: stop bit, then 1101, then the 0 header bit: 0b0011_1010.
  CHECK(sink.data == Cat({kEnableAt401000, {0x3a}, {0x2d, 0x45, 0x23}, {0x01}}));
}

TEST_CASE("return compression: a matching return is one taken bit, another return a TIP") {
  VectorSink sink;
  PtPacketEncoder enc(Untimed(), &sink);
  enc.Enable(0x401000, 1000);
  enc.Call(0x401005, false);
  enc.Return(0x401005, 1001);  // compressed
  enc.Return(0x401005, 1002);  // the ring is empty now: TIP (after flushing the bit)
  enc.Flush();
  CHECK(sink.data == Cat({kEnableAt401000, {0x06}, {0x2d, 0x05, 0x10}}));
}

TEST_CASE("zero-length calls and --no-retcomp never compress") {
  VectorSink sink;
  EncoderConfig options = Untimed();
  PtPacketEncoder enc(options, &sink);
  enc.Enable(0x401000, 1000);
  enc.Call(0x401005, /*zero_length=*/true);
  enc.Return(0x401005, 1001);
  CHECK(sink.data == Cat({kEnableAt401000, {0x2d, 0x05, 0x10}}));

  VectorSink no_retcomp_sink;
  options.return_compression = false;
  PtPacketEncoder no_retcomp(options, &no_retcomp_sink);
  no_retcomp.Enable(0x401000, 1000);
  no_retcomp.Call(0x401005, false);
  no_retcomp.Return(0x401005, 1001);
  CHECK(no_retcomp_sink.data == Cat({kEnableAt401000, {0x2d, 0x05, 0x10}}));
}

TEST_CASE("47 bits fill one TNT-64; the 48th starts a new packet") {
  VectorSink sink;
  PtPacketEncoder enc(Untimed(), &sink);
  enc.Enable(0x401000, 1000);
  for (int i = 0; i < 48; ++i) enc.CondBranch(true, 1001 + i);
  enc.Flush();
  // TNT-64: 02 a3, then 6 payload bytes: stop bit at bit 47, 47 taken bits below it.
  const Bytes tnt64 = {0x02, 0xa3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  CHECK(sink.data == Cat({kEnableAt401000, tnt64, {0x06}}));
}

TEST_CASE("a due PSB+ carries FUP(next ip) and resets last-IP and the return ring") {
  VectorSink sink;
  EncoderConfig options = Untimed();
  options.psb_period = 256;
  PtPacketEncoder enc(options, &sink);
  enc.Enable(0x401000, 1000);
  enc.Call(0x401005, false);
  for (int i = 0; i < 30; ++i) enc.IndirectBranch(0x401000 + 16 * i, 1001 + i);  // 3 bytes each
  const size_t before = sink.data.size();
  enc.MaybePsb(0x401234, 1100);  // 33 bytes of PSB+ and enable, 30 * 3 of TIPs: not due yet
  CHECK(sink.data.size() == before);
  for (int i = 0; i < 60; ++i) enc.IndirectBranch(0x401000 + 16 * i, 1101 + i);
  const size_t at_psb = sink.data.size();
  enc.MaybePsb(0x401234, 1200);  // due: PSB, CBR, MODE.Exec, FUP(sext-48), PSBEND
  const Bytes psb_plus = Cat({kPsb, kCbr10, kModeExec64, {0x7d, 0x34, 0x12, 0x40, 0x00, 0x00, 0x00},
                              kPsbEnd});
  CHECK(Bytes(sink.data.begin() + static_cast<long>(at_psb), sink.data.end()) == psb_plus);
  // The call was before the PSB, so the return is a TIP, compressed against the FUP's IP.
  enc.Return(0x401005, 1201);
  CHECK(Bytes(sink.data.begin() + static_cast<long>(at_psb + psb_plus.size()), sink.data.end()) ==
        Bytes{0x2d, 0x05, 0x10});
}
