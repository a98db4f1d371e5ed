// Instruction listing of all streams (see insn_listing.h).
#include "listing/insn_listing.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "listing/insn_lister.h"
#include "capture/piece_reader.h"

namespace ptscope::decode {

Result<DecodeSummary> RunInsns(std::vector<Stream>& streams, const std::string& archive_path,
                               const DecoderSetup& setup,
                               const CodeImages& images, const SidebandTimeline& timeline,
                               const PipelineOptions& options, DecodeSummary summary) {
  const bool to_stdout = options.output_path == "-";
  std::FILE* file = to_stdout ? stdout : std::fopen(options.output_path.c_str(), "wb");
  if (file == nullptr) {
    return Unexpected(Errc::kIo, options.output_path + ": cannot create the output file (" +
                                     std::strerror(errno) + ")");
  }
  // A per-CPU stream's instructions are kept per run (one thread's stretch on one CPU) and
  // written per thread in time order at the end.
  struct Run {
    ThreadKey thread;
    uint64_t time_ns = 0;
    size_t order = 0;
    char* text = nullptr;
    size_t size = 0;
    std::FILE* memory = nullptr;
    std::unique_ptr<InsnWriter> writer;
  };
  std::vector<std::unique_ptr<Run>> runs;
  bool failed = false;
  PieceReader reader(archive_path);
  {
    InsnWriter writer(file);
    for (size_t i = 0; i < streams.size(); ++i) {
      Stream& stream = streams[i];
      InsnLister lister(setup, images, stream.key.pid, stream.key.tid, writer);
      if (stream.cpu >= 0) {
        lister.FollowCpu(timeline, static_cast<uint32_t>(stream.cpu),
                         [&](ThreadKey thread, uint64_t time_ns) -> InsnWriter* {
                           if (thread.tid == 0 || !Selected(options.threads, thread)) return nullptr;
                           auto run = std::make_unique<Run>();
                           run->thread = thread;
                           run->time_ns = time_ns;
                           run->order = runs.size();
                           run->memory = open_memstream(&run->text, &run->size);
                           if (run->memory == nullptr) return nullptr;
                           run->writer = std::make_unique<InsnWriter>(run->memory);
                           runs.push_back(std::move(run));
                           return runs.back()->writer.get();
                         });
      }
      for (const Piece& piece : stream.pieces) {
        if (!piece.loss_before.empty()) summary.stats[Stat::kLostDataGaps]++;
        // One piece at a time, whole: this listing is for checking decoders, not for speed.
        Result<std::span<const uint8_t>> bytes = reader.Bytes(piece, 0, piece.size);
        if (!bytes) {
          summary.stats[Stat::kDecodeErrorGaps]++;
          summary.notes.push_back(StreamName(stream) + ": cannot read the trace: " +
                                  bytes.error().message);
          continue;
        }
        lister.DecodeSegment(bytes->data(), bytes->size());
      }
      summary.instructions += lister.instructions();
      summary.stats[Stat::kDecodeErrorGaps] += lister.errors();
      if (!lister.first_error().empty()) {
        summary.notes.push_back(StreamName(stream) + ": first decode error: " + lister.first_error());
      }
      if (options.progress) options.progress(i + 1, streams.size());
    }
    for (auto& run : runs) {
      run->writer.reset();  // flushes into the memory stream
      std::fclose(run->memory);
    }
    std::stable_sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
      if (a->thread.tid != b->thread.tid) return a->thread.tid < b->thread.tid;
      return a->time_ns != b->time_ns ? a->time_ns < b->time_ns : a->order < b->order;
    });
    writer.Flush();
    for (auto& run : runs) {
      if (run->size != 0 && std::fwrite(run->text, 1, run->size, file) != run->size) failed = true;
      std::free(run->text);
    }
    failed = failed || writer.failed();
  }
  if ((to_stdout ? std::fflush(file) : std::fclose(file)) != 0 || failed) {
    return Unexpected(Errc::kIo, options.output_path + ": write failed (disk full?)");
  }
  return summary;
}

}  // namespace ptscope::decode
