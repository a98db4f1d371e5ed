// make_known_archive BINARY OUT.ptar [--timed|--per-cpu]: a .ptar for tests/perf/known_loop whose PT bytes
// are produced by libipt's encoder (pt_enc_next) from the program's known control flow: enable at
// the entry point, six conditional outcomes (ret T, jnz T, ret T, jnz T, ret T, jnz N), disable at
// the exit syscall. known_loop.expected lists the instructions this decodes to.
//
// --timed adds a TSC packet and pt.tsc but deliberately leaves out the time.* keys and the
// pieces' reference TSC, so the exporter's derivation of both (virtual clock, sideband time) is
// exercised too. --per-cpu (timed) puts the trace in a CPU 1 stream (tid 0) and adds the
// SWITCH_CPU_WIDE record that tells a decoder which thread runs there.
#include <intel-pt.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "elf_file.h"
#include "ptscope/format.h"
#include "ptscope/perf_records.h"

namespace {

namespace fmt = ptscope::format;
namespace perf = ptscope::perf;

constexpr uint32_t kPid = 4243;
constexpr uint64_t kTscStart = 0x1000;

struct ExecSegment {
  uint64_t entry = 0, offset = 0, vaddr = 0, filesz = 0;
  std::vector<uint8_t> build_id;  // NT_GNU_BUILD_ID (empty: none)
};

// The entry point, the first executable PT_LOAD segment and the build id, read with pt-record's
// ELF reader (record::ElfFile: the one hand-written ELF reader of the tree).
ptscope::Result<ExecSegment> ReadExecSegment(const std::string& path) {
  PTSCOPE_ASSIGN_OR_RETURN(ptscope::record::ElfFile elf, ptscope::record::ElfFile::Open(path));
  for (const ptscope::record::ElfSegment& load : elf.LoadSegments()) {
    if (load.flags & ptscope::record::kPfX) {
      return ExecSegment{elf.entry(), load.offset, load.vaddr, load.filesz, elf.build_id()};
    }
  }
  return ptscope::Unexpected(ptscope::Errc::kCorrupt,
                             path + ": no executable PT_LOAD segment: not a program to trace");
}

class Encoder {
 public:
  Encoder() : buffer_(256) {
    pt_config config;
    pt_config_init(&config);
    config.begin = buffer_.data();
    config.end = buffer_.data() + buffer_.size();
    encoder_ = pt_alloc_encoder(&config);
  }
  ~Encoder() { pt_free_encoder(encoder_); }
  void Emit(pt_packet packet) {
    int n = pt_enc_next(encoder_, &packet);
    if (n < 0) std::fprintf(stderr, "pt_enc_next: %s\n", pt_errstr(pt_errcode(n)));
    else size_ += static_cast<size_t>(n);
  }
  static pt_packet Packet(pt_packet_type type) {
    pt_packet p;
    std::memset(&p, 0, sizeof p);
    p.type = type;
    return p;
  }
  static pt_packet ModeExec() {
    pt_packet p = Packet(ppt_mode);
    p.payload.mode.leaf = pt_mol_exec;
    p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
    return p;
  }
  std::vector<uint8_t> Bytes() const { return {buffer_.begin(), buffer_.begin() + size_}; }

 private:
  std::vector<uint8_t> buffer_;
  size_t size_ = 0;
  pt_encoder* encoder_ = nullptr;
};

std::vector<uint8_t> EncodeKnownLoop(uint64_t entry, bool timed) {
  Encoder enc;
  enc.Emit(Encoder::Packet(ppt_psb));
  if (timed) {
    pt_packet tsc = Encoder::Packet(ppt_tsc);
    tsc.payload.tsc.tsc = kTscStart;
    enc.Emit(tsc);
  }
  enc.Emit(Encoder::ModeExec());
  enc.Emit(Encoder::Packet(ppt_psbend));
  pt_packet pge = Encoder::Packet(ppt_tip_pge);
  pge.payload.ip.ipc = pt_ipc_sext_48;
  pge.payload.ip.ip = entry;
  enc.Emit(pge);
  pt_packet tnt = Encoder::Packet(ppt_tnt_8);
  tnt.payload.tnt.bit_size = 6;
  tnt.payload.tnt.payload = 0b111110;  // oldest outcome in the highest bit
  enc.Emit(tnt);
  pt_packet pgd = Encoder::Packet(ppt_tip_pgd);
  pgd.payload.ip.ipc = pt_ipc_suppressed;
  enc.Emit(pgd);
  return enc.Bytes();
}

void PutLe32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// The timed variant's MMAP2 carries the build id (misc 0x4000); the untimed one the inode form.
std::vector<uint8_t> Sideband(const std::string& path, const ExecSegment& seg, uint64_t t0,
                              uint64_t t1, bool mmap_build_id, bool per_cpu) {
  perf::RecordLayout layout{0x10086, true};
  auto make = [&](uint32_t type, uint16_t misc, perf::RecordBody body, uint64_t time) {
    perf::Record r;
    r.type = type;
    r.misc = misc;
    r.body = std::move(body);
    perf::SampleId id;
    id.pid = id.tid = kPid;
    id.time = time;
    id.cpu = per_cpu ? 1 : 0;
    id.id = 1;
    r.sample_id = id;
    return perf::BuildRecord(r, layout);
  };
  perf::CommRecord comm;
  comm.pid = comm.tid = kPid;
  comm.comm = "known_loop";
  comm.exec = true;
  perf::MmapRecord mmap;
  mmap.pid = mmap.tid = kPid;
  mmap.addr = seg.vaddr;
  mmap.len = seg.filesz;
  mmap.pgoff = seg.offset;
  mmap.prot = PROT_READ | PROT_EXEC;
  mmap.flags = MAP_PRIVATE;
  mmap.filename = path;
  if (mmap_build_id) mmap.build_id = seg.build_id;
  uint16_t mmap_misc = perf::kMiscUser | (mmap_build_id ? perf::kMiscMmapBuildId : 0);
  perf::TaskRecord exit;
  exit.pid = exit.ppid = exit.tid = exit.ptid = kPid;
  exit.time = t1;
  exit.is_exit = true;
  std::vector<uint8_t> out;
  if (per_cpu) {  // idle (pid 0) switches out to known_loop on CPU 1 just before the trace
    perf::SwitchRecord sw;
    sw.out = true;
    sw.cpu_wide = true;
    sw.next_prev_pid = sw.next_prev_tid = kPid;
    auto rec = make(perf::kRecordSwitchCpuWide, perf::kMiscSwitchOut, sw, t0 - 1);
    PutLe32(rec, rec.size() - 32, 0);  // trailer pid/tid of the switch-out: the idle task
    PutLe32(rec, rec.size() - 28, 0);
    out.insert(out.end(), rec.begin(), rec.end());
  }
  for (auto& rec : {make(perf::kRecordComm, perf::kMiscCommExec, comm, t0),
                    make(perf::kRecordMmap2, mmap_misc, mmap, t0),
                    make(perf::kRecordExit, 0, exit, t1)}) {
    out.insert(out.end(), rec.begin(), rec.end());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool per_cpu = argc == 4 && std::strcmp(argv[3], "--per-cpu") == 0;
  if (argc < 3 || argc > 4 || (argc == 4 && !per_cpu && std::strcmp(argv[3], "--timed") != 0)) {
    std::fprintf(stderr, "usage: make_known_archive BINARY OUT.ptar [--timed|--per-cpu]\n");
    return 2;
  }
  bool timed = argc == 4;
  char* real = realpath(argv[1], nullptr);
  if (real == nullptr) {
    std::fprintf(stderr, "make_known_archive: %s: %s\n", argv[1], std::strerror(errno));
    return 1;
  }
  ptscope::Result<ExecSegment> exec = ReadExecSegment(real);
  if (!exec) {
    std::fprintf(stderr, "make_known_archive: %s\n", exec.error().message.c_str());
    free(real);
    return 1;
  }
  const ExecSegment& seg = *exec;
  std::string path = real;
  free(real);
  uint64_t t0 = timed ? kTscStart : 0, t1 = timed ? kTscStart + 1000 : 0;
  std::vector<fmt::Chunk> chunks;
  fmt::MetadataChunk meta;
  meta.entries = {{"tool", "make_known_archive"}, {"capture.mode", "full"},
                  {"capture.emulated", "1"}, {"pt.config", timed ? "0x2401" : "0x2001"},
                  {"pt.tsc", timed ? "1" : "0"}, {"pt.user", "1"}, {"pt.kernel", "0"},
                  {"cpu.vendor", "GenuineIntel"}, {"cpu.family", "6"}, {"cpu.model", "85"},
                  {"cpu.stepping", "4"}, {"host.name", "known-host"}};
  if (timed) meta.entries.push_back({"emulate.virtual_ghz", "1.0"});
  else meta.entries.insert(meta.entries.end(), {{"time.shift", "0"}, {"time.mult", "1"},
                                                {"time.zero", "0"}, {"time.cap_user_time_zero", "0"}});
  chunks.push_back(meta);
  fmt::SidebandAttrChunk attr;
  attr.attr_id = 1;
  attr.sample_type = 0x10086;
  attr.ids = {1};
  chunks.push_back(attr);
  fmt::SidebandChunk sideband;
  sideband.attr_id = 1;
  sideband.records = Sideband(path, seg, t0, t1, timed, per_cpu);
  chunks.push_back(sideband);
  fmt::ModuleChunk module;
  module.path = path;
  module.build_id = seg.build_id;
  chunks.push_back(module);
  fmt::PtDataChunk piece;
  piece.stream_id = 0;
  piece.cpu = per_cpu ? 1 : -1;
  piece.pid = piece.tid = per_cpu ? 0 : kPid;
  piece.reference_tsc = 0;
  piece.data = EncodeKnownLoop(seg.entry, timed);
  chunks.push_back(piece);
  auto writer = fmt::ArchiveWriter::Create(argv[2]);
  if (!writer) {
    std::fprintf(stderr, "make_known_archive: %s\n", writer.error().message.c_str());
    return 1;
  }
  for (const auto& chunk : chunks) {
    if (auto st = (*writer)->Write(chunk); !st) {
      std::fprintf(stderr, "make_known_archive: %s\n", st.error().message.c_str());
      return 1;
    }
  }
  if (auto st = (*writer)->Close(); !st) {
    std::fprintf(stderr, "make_known_archive: %s\n", st.error().message.c_str());
    return 1;
  }
  return 0;
}
