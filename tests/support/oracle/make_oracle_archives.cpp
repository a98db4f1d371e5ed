// make_oracle_archives DIR: writes hand-built inputs for the ipt_insns self-test.
//
//   DIR/code.bin   20 bytes of x86-64 code, "mapped" at 0x400000 by the sideband
//   DIR/decoy.bin  int3 bytes, mapped where code.bin is but only before exec or non-executable:
//                  if the oracle wrongly used such a mapping, decoding would fail
//   DIR/good.ptar  two thread streams (one in the vdso blob), snapshot pieces out of order with
//                  a torn packet before the first PSB
//   DIR/bad.ptar   one stream of four PSB segments: valid, tracing enabled at an unmapped address
//                  (a decode error), valid, valid. libipt reports the error only after reading
//                  the third segment's PSB+, so re-syncing forward resumes at the fourth.
// The instruction sequences they must decode to are written by hand in expected_*.txt.
#include <intel-pt.h>
#include <sys/mman.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ptscope/format.h"
#include "ptscope/perf_records.h"

namespace {

namespace fmt = ptscope::format;
namespace perf = ptscope::perf;

constexpr uint64_t kCodeBase = 0x400000;
constexpr uint64_t kVdsoBase = 0x7fff0000;
constexpr uint64_t kUnmapped = 0x500000;
constexpr uint32_t kPid = 100, kTid2 = 101;

// 0x00 nop | 0x01 test rax,rax | 0x04 je 0x08 | 0x06 nop | 0x07 nop | 0x08 call 0x10
// 0x0d syscall | 0x0f nop | 0x10 jne 0x13 | 0x12 ret | 0x13 ret
const std::vector<uint8_t> kCode = {0x90, 0x48, 0x85, 0xc0, 0x74, 0x02, 0x90, 0x90, 0xe8, 0x03,
                                    0x00, 0x00, 0x00, 0x0f, 0x05, 0x90, 0x75, 0x01, 0xc3, 0xc3};
// vdso: 0x00 nop | 0x01 syscall
const std::vector<uint8_t> kVdso = {0x90, 0x0f, 0x05};

class Encoder {
 public:
  Encoder() : buffer_(4096) {
    pt_config config;
    pt_config_init(&config);
    config.begin = buffer_.data();
    config.end = buffer_.data() + buffer_.size();
    encoder_ = pt_alloc_encoder(&config);
  }
  ~Encoder() { pt_free_encoder(encoder_); }

  void Psb() {  // PSB+ with tracing state carried by the packets that follow it
    Emit(Simple(ppt_psb));
    pt_packet mode = Simple(ppt_mode);
    mode.payload.mode.leaf = pt_mol_exec;
    mode.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
    Emit(mode);
    Emit(Simple(ppt_psbend));
  }
  void Enable(uint64_t ip) {  // MODE.Exec, TIP.PGE(ip)
    pt_packet mode = Simple(ppt_mode);
    mode.payload.mode.leaf = pt_mol_exec;
    mode.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
    Emit(mode);
    Emit(Ip(ppt_tip_pge, pt_ipc_sext_48, ip));
  }
  void Tnt(uint8_t bits, uint64_t payload) {  // oldest branch in the most significant bit
    pt_packet tnt = Simple(ppt_tnt_8);
    tnt.payload.tnt.bit_size = bits;
    tnt.payload.tnt.payload = payload;
    Emit(tnt);
  }
  void DisableSuppressed() { Emit(Ip(ppt_tip_pgd, pt_ipc_suppressed, 0)); }
  std::vector<uint8_t> Bytes() const { return {buffer_.begin(), buffer_.begin() + size_}; }

 private:
  static pt_packet Simple(pt_packet_type type) {
    pt_packet packet{};
    packet.type = type;
    return packet;
  }
  static pt_packet Ip(pt_packet_type type, pt_ip_compression ipc, uint64_t ip) {
    pt_packet packet = Simple(type);
    packet.payload.ip.ipc = ipc;
    packet.payload.ip.ip = ip;
    return packet;
  }
  void Emit(const pt_packet& packet) {
    int written = pt_enc_next(encoder_, &packet);
    if (written < 0) {
      std::fprintf(stderr, "make_oracle_archives: pt_enc_next: %s\n", pt_errstr(pt_errcode(written)));
      std::abort();
    }
    size_ += static_cast<size_t>(written);
  }
  std::vector<uint8_t> buffer_;
  pt_encoder* encoder_ = nullptr;
  size_t size_ = 0;
};

// The 7 instructions of code.bin from 0x400000 to the syscall: je taken, jne not taken, the ret
// compressed (its call came after the PSB).
void EncodeCodeRun(Encoder& enc) {
  enc.Enable(kCodeBase);
  enc.Tnt(3, 0b101);
  enc.DisableSuppressed();
}

perf::Record MakeRecord(uint32_t type, uint16_t misc, perf::RecordBody body, uint64_t time) {
  perf::Record record;
  record.type = type;
  record.misc = misc;
  record.body = std::move(body);
  perf::SampleId id;
  id.pid = kPid;
  id.tid = kPid;
  id.time = time;
  record.sample_id = id;
  return record;
}

perf::Record Mmap2(const std::string& path, uint32_t prot, uint64_t time,
                   uint64_t addr = kCodeBase) {
  perf::MmapRecord mmap;
  mmap.pid = kPid;
  mmap.tid = kPid;
  mmap.addr = addr;
  mmap.len = 0x1000;  // page-sized like a real mapping; the file is shorter
  mmap.prot = prot;
  mmap.flags = MAP_PRIVATE;
  mmap.filename = path;
  return MakeRecord(perf::kRecordMmap2, perf::kMiscUser, mmap, time);
}

std::vector<uint8_t> Sideband(const std::string& dir) {
  perf::RecordLayout layout{perf::kSampleTid | perf::kSampleTime | perf::kSampleCpu |
                                perf::kSampleIdentifier,
                            true};
  perf::CommRecord comm;
  comm.pid = kPid;
  comm.tid = kPid;
  comm.comm = "oracle-test";
  comm.exec = true;
  std::vector<perf::Record> records = {
      Mmap2(dir + "/decoy.bin", PROT_READ | PROT_EXEC, 1),  // before exec: forgotten
      MakeRecord(perf::kRecordComm, perf::kMiscCommExec, comm, 2),
      Mmap2(dir + "/code.bin", PROT_READ | PROT_EXEC, 3),
      Mmap2(dir + "/decoy.bin", PROT_READ | PROT_WRITE, 4),  // data mapping: not code
      Mmap2("[vdso]", PROT_READ | PROT_EXEC, 5, kVdsoBase),   // its bytes are the vdso blob
  };
  std::vector<uint8_t> bytes;
  for (const auto& record : records) {
    auto built = perf::BuildRecord(record, layout);
    bytes.insert(bytes.end(), built.begin(), built.end());
  }
  return bytes;
}

fmt::PtDataChunk Piece(uint32_t stream, uint32_t tid, uint64_t offset, std::vector<uint8_t> data) {
  fmt::PtDataChunk piece;
  piece.stream_id = stream;
  piece.pid = kPid;
  piece.tid = tid;
  piece.stream_offset = offset;
  piece.flags = fmt::kPtSnapshot;
  piece.data = std::move(data);
  return piece;
}

bool WriteArchive(const std::string& path, const std::string& dir,
                  const std::vector<fmt::PtDataChunk>& pieces) {
  auto writer = fmt::ArchiveWriter::Create(path);
  if (!writer.has_value()) return false;
  fmt::SidebandAttrChunk attr;
  attr.attr_id = 7;
  attr.sample_type = perf::kSampleTid | perf::kSampleTime | perf::kSampleCpu | perf::kSampleIdentifier;
  fmt::SidebandChunk sideband;
  sideband.attr_id = 7;
  sideband.records = Sideband(dir);
  fmt::BlobChunk vdso;
  vdso.kind = fmt::BlobKind::kVdso;
  vdso.name = "vdso64";
  vdso.pid = kPid;
  vdso.vaddr = kVdsoBase;
  vdso.data = kVdso;
  std::vector<fmt::Chunk> chunks = {attr, sideband, vdso};
  for (const auto& piece : pieces) chunks.push_back(piece);
  for (const auto& chunk : chunks) {
    if (!(*writer)->Write(chunk).has_value()) return false;
  }
  return (*writer)->Close().has_value();
}

bool WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_oracle_archives DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = WriteFile(dir + "/code.bin", kCode) &&
            WriteFile(dir + "/decoy.bin", std::vector<uint8_t>(kCode.size(), 0xcc));

  // good: thread kPid runs code.bin twice (two PSB segments), thread kTid2 runs the vdso.
  Encoder main_thread;
  main_thread.Psb();
  EncodeCodeRun(main_thread);
  main_thread.Psb();
  EncodeCodeRun(main_thread);
  std::vector<uint8_t> stream = {0x19, 0x11, 0x22, 0x33};  // a torn TSC packet before the PSB
  auto body = main_thread.Bytes();
  stream.insert(stream.end(), body.begin(), body.end());
  const size_t split = 23;  // inside PSBEND: pieces may break packets anywhere
  std::vector<uint8_t> first(stream.begin(), stream.begin() + split);
  std::vector<uint8_t> second(stream.begin() + split, stream.end());
  Encoder vdso_thread;
  vdso_thread.Psb();
  vdso_thread.Enable(kVdsoBase);
  vdso_thread.DisableSuppressed();
  ok = ok && WriteArchive(dir + "/good.ptar", dir,
                          {Piece(2, kTid2, 0, vdso_thread.Bytes()),
                           Piece(1, kPid, split, second), Piece(1, kPid, 0, first)});

  // bad: see the file comment.
  Encoder bad;
  bad.Psb();
  EncodeCodeRun(bad);
  bad.Psb();
  bad.Enable(kUnmapped);
  bad.DisableSuppressed();
  bad.Psb();
  EncodeCodeRun(bad);
  bad.Psb();
  EncodeCodeRun(bad);
  ok = ok && WriteArchive(dir + "/bad.ptar", dir, {Piece(1, kPid, 0, bad.Bytes())});
  if (!ok) {
    std::fprintf(stderr, "make_oracle_archives: cannot write the test inputs into %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
