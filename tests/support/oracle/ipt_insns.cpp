// ipt_insns: the project's independent libipt oracle.
//
//   ipt_insns ARCHIVE.ptar   prints `TID 0xADDRESS` for every instruction libipt's INSTRUCTION
//                            decoder (pt_insn) reconstructs, stream by stream.
//   ipt_insns --time ARCHIVE.ptar
//                            `TID 0xADDRESS TSC`, TSC from pt_insn_time (libipt's own timing).
//
// It shares nothing with pt-decode except the archive reader: the image comes straight from the
// MMAP2 sideband (files on disk) and the vdso blob, the config from the metadata, and decoding is
// the textbook pt_insn loop. Decode errors print nothing in-line; they are counted, decoding
// re-syncs at the next PSB, and the exit status is 1 with a summary on stderr. (libipt may have
// read the following PSB+ before it reports an error; re-syncing then skips that segment. Output
// after an error is a diagnostic aid only: any error fails a comparison.)
#include <intel-pt.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ptscope/capture.h"
#include "ptscope/format.h"
#include "capture_mappings.h"

namespace {

using ptscope::format::Archive;
using ptscope::oracle::CollectMappings;
using ptscope::oracle::Mapping;

uint64_t MetadataNumber(const Archive& archive, const char* key) {
  auto value = archive.Get(key);
  return value ? std::strtoull(value->c_str(), nullptr, 0) : 0;
}

// The decoder config: cpu left zeroed (spec behaviour, no errata); timing from the metadata.
pt_config MakeConfig(const Archive& archive, std::vector<uint8_t>& bytes) {
  pt_config config;
  pt_config_init(&config);
  config.begin = bytes.data();
  config.end = bytes.data() + bytes.size();
  config.cpuid_0x15_eax = static_cast<uint32_t>(MetadataNumber(archive, "pt.cpuid15_eax"));
  config.cpuid_0x15_ebx = static_cast<uint32_t>(MetadataNumber(archive, "pt.cpuid15_ebx"));
  config.mtc_freq = static_cast<uint8_t>(MetadataNumber(archive, "pt.mtc_period"));
  config.nom_freq = static_cast<uint8_t>(MetadataNumber(archive, "pt.max_nonturbo_ratio"));
  return config;
}

bool g_print_time = false;  // --time

struct StreamResult {
  uint64_t instructions = 0;
  uint64_t errors = 0;
  std::string first_error;
};

void NoteError(pt_insn_decoder* decoder, int status, StreamResult& result) {
  ++result.errors;
  if (!result.first_error.empty()) return;
  uint64_t offset = 0;
  pt_insn_get_offset(decoder, &offset);
  result.first_error = std::string(pt_errstr(pt_errcode(status))) + " at stream offset " +
                       std::to_string(offset);
}

// Decodes from the current sync point until an error or the end; returns the negative status.
int DecodeFromSync(pt_insn_decoder* decoder, int status, uint32_t tid, StreamResult& result) {
  for (;;) {
    while (status & pts_event_pending) {
      pt_event event;
      status = pt_insn_event(decoder, &event, sizeof event);
      if (status < 0) return status;
    }
    pt_insn insn;
    std::memset(&insn, 0, sizeof insn);
    insn.iclass = ptic_error;
    status = pt_insn_next(decoder, &insn, sizeof insn);
    // An error can follow a valid instruction in the same call (libipt howto, "Iterating").
    if (insn.iclass != ptic_error) {
      uint64_t tsc = 0;
      if (g_print_time) {
        uint32_t lost_mtc = 0, lost_cyc = 0;
        pt_insn_time(decoder, &tsc, &lost_mtc, &lost_cyc);
        std::printf("%" PRIu32 " 0x%" PRIx64 " %" PRIu64 "\n", tid, insn.ip, tsc);
      } else {
        std::printf("%" PRIu32 " 0x%" PRIx64 "\n", tid, insn.ip);
      }
      ++result.instructions;
    }
    if (status < 0) return status;
  }
}

StreamResult DecodeStream(std::vector<uint8_t>& bytes, const Archive& archive, pt_image* image,
                          uint32_t tid) {
  StreamResult result;
  pt_config config = MakeConfig(archive, bytes);
  pt_insn_decoder* decoder = pt_insn_alloc_decoder(&config);
  if (decoder == nullptr) {
    result.errors = 1;
    result.first_error = "pt_insn_alloc_decoder failed";
    return result;
  }
  pt_insn_set_image(decoder, image);
  constexpr uint64_t kMaxErrors = 100000;  // each re-sync moves past one PSB; this is a backstop
  for (int status = pt_insn_sync_forward(decoder); status != -pte_eos;
       status = pt_insn_sync_forward(decoder)) {
    if (status >= 0) status = DecodeFromSync(decoder, status, tid, result);
    if (status == -pte_eos) break;
    NoteError(decoder, status, result);
    if (result.errors >= kMaxErrors) break;
  }
  pt_insn_free_decoder(decoder);
  return result;
}

// The vdso has no file: write each recorded copy to a temp file so libipt can map it.
struct VdsoFile {
  uint32_t pid = 0;
  uint64_t vaddr = 0;
  uint64_t size = 0;
  std::string path;
};

bool WriteVdsoFiles(const Archive& archive, std::vector<VdsoFile>& files, std::string* error) {
  for (const auto& blob : archive.blobs) {
    if (blob.kind != ptscope::format::BlobKind::kVdso || blob.data.empty()) continue;
    char name[] = "/tmp/ipt_insns_vdso_XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0) {
      *error = "cannot create a temp file for the vdso blob (check /tmp)";
      return false;
    }
    files.push_back({blob.pid, blob.vaddr, blob.data.size(), name});
    bool written = write(fd, blob.data.data(), blob.data.size()) ==
                   static_cast<ssize_t>(blob.data.size());
    close(fd);
    if (!written) {
      *error = std::string("cannot write the vdso blob to ") + name;
      return false;
    }
  }
  return true;
}

pt_image* BuildImage(uint32_t pid, const std::vector<Mapping>& mappings,
                     const std::vector<VdsoFile>& vdsos) {
  pt_image* image = pt_image_alloc(nullptr);
  for (const Mapping& m : mappings) {
    int status = pt_image_add_file(image, m.path.c_str(), m.pgoff, m.len, nullptr, m.addr);
    if (status < 0) {
      std::fprintf(stderr, "ipt_insns: warning: pid %u: cannot add %s at 0x%" PRIx64 ": %s\n",
                   pid, m.path.c_str(), m.addr, pt_errstr(pt_errcode(status)));
    }
  }
  for (const VdsoFile& vdso : vdsos) {
    if (vdso.pid != 0 && vdso.pid != pid) continue;
    int status = pt_image_add_file(image, vdso.path.c_str(), 0, vdso.size, nullptr, vdso.vaddr);
    if (status < 0) {
      std::fprintf(stderr, "ipt_insns: warning: pid %u: cannot add the vdso: %s\n", pid,
                   pt_errstr(pt_errcode(status)));
    }
  }
  return image;
}

struct StreamBytes {
  uint32_t pid = 0, tid = 0;
  std::vector<std::pair<uint64_t, const std::vector<uint8_t>*>> pieces;  // by stream_offset
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--time") == 0) {
    g_print_time = true;
    ++argv;
    --argc;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: ipt_insns [--time] ARCHIVE.ptar\n");
    return 2;
  }
  auto archive_or = ptscope::format::OpenCapture(argv[1]);
  if (!archive_or.has_value()) {
    std::fprintf(stderr, "ipt_insns: %s\n", archive_or.error().message.c_str());
    return 2;
  }
  const Archive& archive = archive_or.value();
  std::string error;
  auto mappings = CollectMappings(archive, &error).by_pid;
  std::vector<VdsoFile> vdsos;
  if (!error.empty() || !WriteVdsoFiles(archive, vdsos, &error)) {
    std::fprintf(stderr, "ipt_insns: %s: %s\n", argv[1], error.c_str());
    return 2;
  }
  // One decode per (stream, snapshot): a snapshot is its own byte sequence.
  std::map<std::pair<uint32_t, uint32_t>, StreamBytes> streams;
  for (const auto& piece : archive.pt_data) {
    StreamBytes& stream = streams[{piece.stream_id, piece.snapshot_index}];
    stream.pid = piece.pid;
    stream.tid = piece.tid;
    stream.pieces.emplace_back(piece.stream_offset, &piece.data);
  }
  static char out_buffer[1 << 16];
  std::setvbuf(stdout, out_buffer, _IOFBF, sizeof out_buffer);
  uint64_t total_errors = 0;
  for (auto& [key, stream] : streams) {
    std::stable_sort(stream.pieces.begin(), stream.pieces.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<uint8_t> bytes;
    for (const auto& piece : stream.pieces) bytes.insert(bytes.end(), piece.second->begin(), piece.second->end());
    if (bytes.empty()) continue;
    pt_image* image = BuildImage(stream.pid, mappings[stream.pid], vdsos);
    StreamResult result = DecodeStream(bytes, archive, image, stream.tid);
    pt_image_free(image);
    if (result.errors != 0) {
      std::fprintf(stderr,
                   "ipt_insns: %s: stream %u (snapshot %u, tid %u): %" PRIu64
                   " decode errors, first: %s (%" PRIu64 " instructions decoded)\n",
                   argv[1], key.first, key.second, stream.tid, result.errors,
                   result.first_error.c_str(), result.instructions);
    }
    total_errors += result.errors;
  }
  std::fflush(stdout);
  for (const VdsoFile& vdso : vdsos) unlink(vdso.path.c_str());
  if (!archive.damage.empty()) {
    std::fprintf(stderr, "ipt_insns: %s: %s\n", argv[1],
                 ptscope::format::DescribeDamage(archive.damage).c_str());
    return 1;
  }
  return total_errors == 0 ? 0 : 1;
}
