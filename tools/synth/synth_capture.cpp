#include "synth_capture.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "capture_writer.h"
#include "code_graph.h"
#include "elf_code.h"
#include "ptscope/format.h"
#include "ptscope/output_file.h"
#include "ptscope/perf_records.h"
#include "synth_cpus.h"
#include "walker.h"

namespace ptscope::synth {
namespace {

constexpr uint32_t kPid = 4242;
constexpr uint64_t kTscBase = 1000000000;  // the virtual clock starts here, as pt-emulate's
constexpr uint16_t kTimeShift = 20;        // ns = (tsc * mult) >> shift: 1 tick = 1 ns
constexpr uint32_t kTimeMult = 1u << 20;

// Collects one stream's PT bytes (a thread's, or a CPU's: tid 0, cpu >= 0) and writes a
// PtDataChunk whenever piece_size bytes are full.
class PieceWriter : public ptgen::PacketSink {
 public:
  PieceWriter(record::CaptureWriter* writer, uint32_t stream_id, uint32_t tid, int32_t cpu,
              uint64_t piece_size)
      : writer_(writer), piece_size_(piece_size) {
    chunk_.stream_id = stream_id;
    chunk_.cpu = cpu;
    chunk_.pid = cpu < 0 ? kPid : 0;
    chunk_.tid = tid;
    chunk_.data.reserve(piece_size + 64);
  }
  void Append(const uint8_t* bytes, size_t size) override {
    chunk_.data.insert(chunk_.data.end(), bytes, bytes + size);
    if (chunk_.data.size() >= piece_size_) WritePiece();
  }
  Status Finish(uint64_t reference_tsc) {
    reference_tsc_ = reference_tsc;
    if (!chunk_.data.empty()) WritePiece();
    return status_;
  }

 private:
  void WritePiece() {
    chunk_.reference_tsc = reference_tsc_;
    if (status_) status_ = writer_->WritePt(chunk_);  // Append cannot return it: kept for Finish
    chunk_.stream_offset += chunk_.data.size();
    chunk_.data.clear();
  }
  record::CaptureWriter* writer_;
  uint64_t piece_size_;
  uint64_t reference_tsc_ = kTscBase;
  format::PtDataChunk chunk_;
  Status status_;
};

std::vector<std::pair<std::string, std::string>> Metadata(const SynthOptions& o) {
  const ptgen::EncoderConfig& e = o.encoder;
  const bool tsc = e.timing != ptgen::Timing::kNone, mtc = e.timing >= ptgen::Timing::kMtc,
             cyc = e.timing == ptgen::Timing::kCyc;
  uint64_t psb_code = 0;  // perf's psb_period field: 2^(code + 11) bytes
  while (psb_code < 15 && (uint64_t{1} << (psb_code + 12)) <= e.psb_period) ++psb_code;
  const uint64_t config = 1 | (uint64_t{1} << 13) | (tsc ? 1u << 10 : 0) | (mtc ? 1u << 9 : 0) |
                          (cyc ? 1u << 1 : 0) | (e.return_compression ? 0 : 1u << 11) |
                          (mtc ? uint64_t{e.mtc_freq} << 14 : 0) | (psb_code << 24);
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(config));
  auto u = [](uint64_t v) { return std::to_string(v); };
  return {
      {"tool", "pt-synth"}, {"tool.version", "0.1.0"}, {"command", o.command_line},
      {"capture.emulated", "1"}, {"capture.mode", "full"}, {"trigger.reason", "max-instructions"},
      {"cpu.vendor", "GenuineIntel"}, {"cpu.family", "6"}, {"cpu.model", "0"},
      {"cpu.stepping", "0"},
      {"pt.config", hex}, {"pt.tsc", u(tsc)}, {"pt.mtc", u(mtc)}, {"pt.mtc_period", u(e.mtc_freq)},
      {"pt.cyc", u(cyc)}, {"pt.cyc_thresh", "0"}, {"pt.psb_period", u(e.psb_period)},
      {"pt.noretcomp", u(!e.return_compression)}, {"pt.branch", "1"}, {"pt.user", "1"},
      {"pt.kernel", "0"}, {"pt.filters", ""}, {"pt.max_nonturbo_ratio", u(e.cbr)},
      {"pt.cpuid15_eax", "1"}, {"pt.cpuid15_ebx", u(e.tsc_per_ctc)},
      {"time.shift", u(kTimeShift)}, {"time.mult", u(kTimeMult)}, {"time.zero", "0"},
      {"time.cap_user_time_zero", "1"}, {"emulate.virtual_ghz", "1"},
      {"synth.seed", u(o.seed)}, {"synth.binary", o.binary},
  };
}

// Per-CPU captures only (per-thread archives stay as they were).
void AddCpuMetadata(const SynthOptions& o, std::vector<std::pair<std::string, std::string>>* entries) {
  if (o.cpus == 0) return;
  entries->push_back({"synth.cpus", std::to_string(o.cpus)});
  entries->push_back({"synth.timeslice", std::to_string(o.timeslice)});
}

perf::Record Record(uint32_t type, perf::RecordBody body) {
  perf::Record record;
  record.type = type;
  record.misc = perf::kMiscUser;
  record.body = std::move(body);
  return record;
}

// COMM(exec), one MMAP2 per executable segment (build id form), a FORK per extra thread; times
// are ns, equal to the TSC under this clock.
Status WriteStartSideband(record::CaptureWriter& writer, const ElfCode& elf, uint32_t threads) {
  const std::string comm = elf.path.substr(elf.path.rfind('/') + 1).substr(0, 15);
  PTSCOPE_TRY(writer.AddRecord(Record(perf::kRecordComm, perf::CommRecord{kPid, kPid, comm, true}),
                               kPid, kPid, kTscBase - 100));
  for (const ExecSegment& seg : elf.segments) {
    perf::MmapRecord m;
    m.pid = kPid;
    m.tid = kPid;
    m.addr = elf.load_base + (seg.vaddr & ~uint64_t{0xfff});
    m.pgoff = seg.offset & ~uint64_t{0xfff};
    m.len = ((seg.vaddr & 0xfff) + seg.memsz + 0xfff) & ~uint64_t{0xfff};
    m.build_id = elf.build_id;
    m.prot = 5;   // PROT_READ | PROT_EXEC
    m.flags = 2;  // MAP_PRIVATE
    m.filename = elf.path;
    PTSCOPE_TRY(writer.AddRecord(Record(perf::kRecordMmap2, std::move(m)), kPid, kPid,
                                 kTscBase - 50));
  }
  for (uint32_t t = 1; t < threads; ++t) {
    perf::TaskRecord fork{kPid, kPid, kPid + t, kPid, kTscBase - 10, false};
    PTSCOPE_TRY(writer.AddRecord(Record(perf::kRecordFork, fork), kPid, kPid + t, kTscBase - 10));
  }
  return Ok();
}

// --untraced-exits (see SynthOptions).
Status WriteUntracedExits(const std::string& path, const std::vector<UntracedExit>& exits) {
  std::string text;
  char line[80];
  for (const UntracedExit& e : exits) {
    std::snprintf(line, sizeof line, "%u %" PRIu64 " 0x%" PRIx64 "\n", e.tid, e.instructions,
                  e.target);
    text += line;
  }
  PTSCOPE_ASSIGN_OR_RETURN(format::OutputFile file, format::OutputFile::CreateReplacing(path));
  PTSCOPE_TRY(file.Write(text.data(), text.size()));
  return file.Commit();
}

// The walks of every thread, each into its own stream (per-thread) or scheduled on the CPUs'
// streams (per-CPU); the sideband records they make (EXIT, switches) in `sideband`, any order.
struct Walks {
  const SynthOptions& o;
  CodeGraph& graph;
  record::CaptureWriter& writer;
  GroundTruthWriter* truth;
  std::vector<UntracedExit>* untraced;
  SynthSummary& summary;
  std::vector<SwitchSideband> sideband;

  WalkOptions OptionsFor(uint32_t t) const {
    WalkOptions walk;
    walk.instructions = o.instructions / o.threads + (t < o.instructions % o.threads ? 1 : 0);
    walk.seed = o.seed * 1000003 + t;
    walk.tid = kPid + t;
    walk.start_tsc = kTscBase;
    if (!o.untraced_exits.empty()) walk.exits = untraced;
    return walk;
  }
  void Count(const WalkStats& stats, uint32_t tid) {
    summary.instructions += stats.instructions;
    summary.calls += stats.calls;
    summary.returns += stats.returns;
    summary.syscalls += stats.syscalls;
    summary.restarts += stats.restarts;
    summary.library_calls += stats.library_calls;
    summary.max_depth = std::max(summary.max_depth, stats.max_depth);
    SwitchSideband& exit = sideband.emplace_back();  // (in place, as in SynthCpus::AddSwitch)
    exit.time = stats.end_tsc;
    exit.pid = kPid;
    exit.tid = tid;
    exit.record.type = perf::kRecordExit;
    exit.record.misc = perf::kMiscUser;
    exit.record.body = perf::TaskRecord{kPid, kPid, tid, kPid, stats.end_tsc, true};
  }
  void CountStream(const ptgen::PtPacketEncoder& encoder) {
    summary.pt_bytes += encoder.stats().bytes;
    summary.psbs += encoder.stats().psbs;
    summary.compressed_returns += encoder.stats().compressed_returns;
  }

  Status PerThread() {
    for (uint32_t t = 0; t < o.threads; ++t) {
      PieceWriter pieces(&writer, t + 1, kPid + t, -1, o.piece_size);
      ptgen::PtPacketEncoder encoder(o.encoder, &pieces);
      PTSCOPE_ASSIGN_OR_RETURN(WalkStats stats, Walk(graph, encoder, OptionsFor(t), truth));
      PTSCOPE_TRY(pieces.Finish(stats.end_tsc));
      Count(stats, kPid + t);
      CountStream(encoder);
    }
    return Ok();
  }

  Status PerCpu() {
    for (uint32_t c = 0; c < o.cpus; ++c) {  // perf writes one per CPU as the AUX event starts
      PTSCOPE_TRY(writer.AddRecord(Record(perf::kRecordItraceStart, perf::ItraceStartRecord{0, 0}),
                                   0, 0, kTscBase - 5, c));
    }
    std::vector<std::unique_ptr<PieceWriter>> pieces;
    std::vector<std::unique_ptr<ptgen::PtPacketEncoder>> encoders;
    std::vector<ptgen::PtPacketEncoder*> streams;
    for (uint32_t c = 0; c < o.cpus; ++c) {
      pieces.push_back(std::make_unique<PieceWriter>(&writer, c + 1, 0, static_cast<int32_t>(c),
                                                     o.piece_size));
      encoders.push_back(std::make_unique<ptgen::PtPacketEncoder>(o.encoder, pieces.back().get()));
      streams.push_back(encoders.back().get());
    }
    const uint64_t ticks_per_mtc = o.encoder.timing == ptgen::Timing::kMtc
                                       ? uint64_t{o.encoder.tsc_per_ctc} << o.encoder.mtc_freq
                                       : 0;
    SynthCpus cpus(streams, o.threads, kPid, kPid, kTscBase, o.timeslice, ticks_per_mtc);
    std::vector<Result<WalkStats>> results(o.threads, Unexpected(Errc::kInternal, "not walked"));
    std::vector<WalkOptions> options;
    for (uint32_t t = 0; t < o.threads; ++t) {
      options.push_back(OptionsFor(t));
      options.back().placement = cpus.placement(t);
    }
    cpus.Schedule([&](size_t t) { results[t] = Walk(graph, *streams[0], options[t], truth); });
    uint64_t end = kTscBase;
    for (uint32_t t = 0; t < o.threads; ++t) {
      if (!results[t]) return results[t].error();
      Count(*results[t], kPid + t);
      end = std::max(end, results[t]->end_tsc);
    }
    for (uint32_t c = 0; c < o.cpus; ++c) {
      encoders[c]->Flush();
      PTSCOPE_TRY(pieces[c]->Finish(end));
      CountStream(*encoders[c]);
    }
    sideband.insert(sideband.end(), cpus.sideband().begin(), cpus.sideband().end());
    summary.switch_ins = cpus.switch_ins();
    return Ok();
  }
};

}  // namespace

Result<SynthSummary> WriteSynthCapture(const SynthOptions& o) {
  const auto started = std::chrono::steady_clock::now();
  PTSCOPE_ASSIGN_OR_RETURN(ElfCode elf, LoadElfCode(o.binary));
  CodeGraph graph(elf);
  graph.CollectEntries();
  if (graph.entries().empty()) {
    return Unexpected(Errc::kInvalidArgument,
                      o.binary + ": no decodable function entry to start a walk at (is it x86-64 code?)");
  }
  std::unique_ptr<GroundTruthWriter> truth;
  if (!o.ground_truth.empty()) {
    PTSCOPE_ASSIGN_OR_RETURN(truth, GroundTruthWriter::Create(o.ground_truth));
  }
  record::CaptureOptions capture;
  capture.archive.features = format::kFeatureEmulated;
  if (o.cpus > 0) capture.archive.features |= format::kFeaturePerCpu;
  PTSCOPE_ASSIGN_OR_RETURN(auto writer, record::CaptureWriter::Create(o.output, capture));
  auto metadata = Metadata(o);
  AddCpuMetadata(o, &metadata);
  PTSCOPE_TRY(writer->WriteMetadata(std::move(metadata)));
  PTSCOPE_TRY(WriteStartSideband(*writer, elf, o.threads));
  SynthSummary summary;
  std::vector<UntracedExit> untraced;
  Walks walks{o, graph, *writer, truth.get(), &untraced, summary, {}};
  PTSCOPE_TRY(o.cpus > 0 ? walks.PerCpu() : walks.PerThread());
  // Sideband records in time order; at one time, in the order they were made.
  std::stable_sort(walks.sideband.begin(), walks.sideband.end(),
                   [](const SwitchSideband& a, const SwitchSideband& b) { return a.time < b.time; });
  for (const SwitchSideband& r : walks.sideband) {
    PTSCOPE_TRY(writer->AddRecord(r.record, r.pid, r.tid, r.time, r.cpu));
  }
  if (truth) PTSCOPE_TRY(truth->Close());
  if (!o.untraced_exits.empty()) PTSCOPE_TRY(WriteUntracedExits(o.untraced_exits, untraced));
  PTSCOPE_TRY(writer->Close());
  summary.blocks_decoded = graph.block_count();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return summary;
}

}  // namespace ptscope::synth
