// emulate_verify ARCHIVE GROUND_TRUTH: the end-to-end oracle for pt-emulate. Reads the archive
// (which must be complete), builds a libipt image per process from its MMAP2 records and vdso
// blob, decodes every PT stream with pt_insn and requires each thread's instruction sequence to be
// exactly the ground truth pt-emulate wrote for that thread. Prints one line; exit 0 on a match.
// --suffix: snapshot archives hold only the end of each thread's trace.
// --prefix: the archive of a killed pt-emulate (incomplete, maybe a torn last chunk): every
// thread's decoded instructions must be the start of its ground truth, and the line says how
// many were decoded.
#include <intel-pt.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ptscope/format.h"
#include "ptscope/perf_records.h"

using namespace ptscope;

namespace {

struct Vdso {
  uint64_t vaddr = 0;
  std::vector<uint8_t> bytes;
};

int ReadVdso(uint8_t* buffer, size_t size, const pt_asid*, uint64_t ip, void* context) {
  const auto* vdso = static_cast<const Vdso*>(context);
  if (ip < vdso->vaddr || ip >= vdso->vaddr + vdso->bytes.size()) return -pte_nomap;
  const size_t n = std::min<size_t>(size, vdso->vaddr + vdso->bytes.size() - ip);
  std::memcpy(buffer, vdso->bytes.data() + (ip - vdso->vaddr), n);
  return static_cast<int>(n);
}

std::vector<uint64_t> Decode(std::vector<uint8_t>& trace, const std::vector<perf::MmapRecord>& maps,
                             Vdso* vdso, const format::Archive& archive, int* errors) {
  pt_config config;
  pt_config_init(&config);
  config.begin = trace.data();
  config.end = trace.data() + trace.size();
  config.cpuid_0x15_eax = static_cast<uint32_t>(std::stoul(archive.Get("pt.cpuid15_eax").value_or("0")));
  config.cpuid_0x15_ebx = static_cast<uint32_t>(std::stoul(archive.Get("pt.cpuid15_ebx").value_or("0")));
  config.mtc_freq = static_cast<uint8_t>(std::stoul(archive.Get("pt.mtc_period").value_or("0")));
  config.nom_freq = static_cast<uint8_t>(std::stoul(archive.Get("pt.max_nonturbo_ratio").value_or("0")));
  pt_insn_decoder* decoder = pt_insn_alloc_decoder(&config);
  pt_image* image = pt_insn_get_image(decoder);
  for (const auto& m : maps) {
    if (!(m.prot & 4) || m.filename.empty() || m.filename[0] != '/') continue;
    pt_image_add_file(image, m.filename.c_str(), m.pgoff, m.len, nullptr, m.addr);
  }
  pt_image_set_callback(image, ReadVdso, vdso);
  std::vector<uint64_t> ips;
  for (;;) {
    int status = pt_insn_sync_forward(decoder);
    if (status < 0) break;
    for (;;) {
      while (status & pts_event_pending) {
        pt_event event;
        status = pt_insn_event(decoder, &event, sizeof(event));
        if (status < 0) break;
      }
      if (status < 0 || (status & pts_eos)) break;
      pt_insn insn{};
      status = pt_insn_next(decoder, &insn, sizeof(insn));
      if (insn.iclass != ptic_error) ips.push_back(insn.ip);
      if (status < 0) break;
    }
    if (status < 0 && status != -pte_eos) {
      uint64_t offset = 0;
      pt_insn_get_offset(decoder, &offset);
      std::fprintf(stderr, "decode error at offset %llu: %s\n",
                   static_cast<unsigned long long>(offset), pt_errstr(pt_errcode(status)));
      ++*errors;
    }
  }
  pt_insn_free_decoder(decoder);
  return ips;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 4 ? argv[3] : "";
  const bool suffix = mode == "--suffix";
  const bool prefix = mode == "--prefix";
  if (argc != 3 && !suffix && !prefix) {
    std::fprintf(stderr, "usage: emulate_verify ARCHIVE GROUND_TRUTH [--suffix|--prefix]\n");
    return 2;
  }
  auto archive = format::ReadArchive(argv[1]);
  if (!archive) {
    std::fprintf(stderr, "%s\n", archive.error().message.c_str());
    return 1;
  }
  if (!archive->complete && !prefix) {
    std::fprintf(stderr, "%s: archive is not complete\n", argv[1]);
    return 1;
  }
  for (const format::Damage& damage : archive->damage) {
    if (damage.code != Errc::kTruncated) {
      std::fprintf(stderr, "%s: %s\n", argv[1], damage.reason.c_str());
      return 1;
    }
  }
  std::map<uint32_t, std::vector<uint64_t>> truth;
  std::ifstream in(argv[2]);
  uint32_t tid = 0;
  std::string address;
  while (in >> tid >> address) truth[tid].push_back(std::stoull(address, nullptr, 16));

  std::map<uint32_t, std::vector<perf::MmapRecord>> maps;  // by pid
  perf::RecordLayout layout;
  layout.sample_type = archive->sideband_attrs.empty() ? 0x10086 : archive->sideband_attrs[0].sample_type;
  for (const auto& chunk : archive->sideband) {
    perf::RecordIterator it(chunk.records, layout);
    while (auto record = it.Next()) {
      if (!*record) {
        std::fprintf(stderr, "bad sideband record: %s\n", record->error().message.c_str());
        return 1;
      }
      if (auto* mmap = std::get_if<perf::MmapRecord>(&(*record)->body)) maps[mmap->pid].push_back(*mmap);
    }
  }
  std::map<uint32_t, Vdso> vdsos;
  for (const auto& blob : archive->blobs) {
    if (blob.kind == format::BlobKind::kVdso) vdsos[blob.pid] = Vdso{blob.vaddr, blob.data};
  }
  std::map<uint32_t, std::vector<uint8_t>> streams;  // by tid, pieces in order
  std::map<uint32_t, uint32_t> pid_of;
  for (const auto& piece : archive->pt_data) {
    auto& bytes = streams[piece.tid];
    bytes.insert(bytes.end(), piece.data.begin(), piece.data.end());
    pid_of[piece.tid] = piece.pid;
  }
  int errors = 0;
  uint64_t total = 0;
  for (auto& [stream_tid, bytes] : streams) {
    const auto ips = Decode(bytes, maps[pid_of[stream_tid]], &vdsos[pid_of[stream_tid]], *archive, &errors);
    auto want = truth[stream_tid];
    if (suffix && !ips.empty() && want.size() > ips.size()) {
      // The ring starts at a PSB; at its end a decoder stops at the last packet, which may be a
      // few non-branch instructions before the last one that retired. Align the two.
      size_t end = want.size();
      while (end > ips.size() && want.size() - end <= 16 &&
             !std::equal(ips.begin(), ips.end(), want.begin() + static_cast<long>(end - ips.size())))
        --end;
      want.assign(want.begin() + static_cast<long>(end - ips.size()), want.begin() + static_cast<long>(end));
    }
    if (prefix && ips.size() <= want.size()) want.resize(ips.size());
    total += want.size();
    if (ips != want) {
      size_t i = 0;
      while (i < ips.size() && i < want.size() && ips[i] == want[i]) ++i;
      std::fprintf(stderr, "tid %u: decoded %zu instructions, ground truth %zu, first difference at %zu"
                   " (decoded 0x%llx, truth 0x%llx)\n", stream_tid, ips.size(), want.size(), i,
                   static_cast<unsigned long long>(i < ips.size() ? ips[i] : 0),
                   static_cast<unsigned long long>(i < want.size() ? want[i] : 0));
      ++errors;
    }
  }
  if (streams.size() != truth.size() && !prefix) {
    std::fprintf(stderr, "%zu PT streams but %zu threads in the ground truth\n", streams.size(), truth.size());
    ++errors;
  }
  std::printf("%s: %zu threads, %llu instructions, %s\n", argv[1], streams.size(),
              static_cast<unsigned long long>(total), errors ? "MISMATCH" : "decoded == ground truth");
  return errors ? 1 : 0;
}
