// perf.data interoperability (issue #6): read a Linux perf Intel PT capture into an in-memory
// Archive, and write an Archive as a perf.data that Linux perf (6.1 verified) decodes with
// `perf script --itrace=...` and `perf report`. format/PERF_DATA.md is the normative description
// of the subset of the perf.data layout read and written here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ptscope/format.h"
#include "ptscope/result.h"

namespace ptscope::format {

// Reads a file-mode ("PERFILE2", 104-byte header) little-endian perf.data holding an intel_pt
// event. The Archive has the shape pt-record archives have: metadata from AUXTRACE_INFO, TIME_CONV
// and the header features; one PtDataChunk per AUXTRACE record; the kernel sideband records
// verbatim in Sideband chunks (time order), one SidebandAttrChunk per perf attr; one ModuleChunk
// per executable file mapping. Errors name the file and the offset.
// With options.keep_pt_bytes = false the trace bytes are not read (they are most of a capture):
// each PtDataChunk's data stays empty and Archive::pt_refs says where they are in the file
// (PtDataRef::raw), so that memory holds the sideband only.
// With options.keep_sideband_bytes = false the context-switch records (two per switch of a
// per-CPU capture) are not held either: each Sideband chunk is left empty, in file order, and
// Archive::sideband_ranges says where its records are; ForEachSidebandRecord reads them again.
// (Readers that need time order sort: the file's order is perf's, per CPU ring buffer.)
Result<Archive> ImportPerfData(const std::string& path, const ReadOptions& options = {});
Result<Archive> ImportPerfDataFromBytes(std::vector<uint8_t> bytes, const std::string& name);

// Writes an archive from ImportPerfData (sideband bytes kept) as a .ptar at `out_path`
// (ArchiveWriter, `options`):
// metadata, sideband attrs, sideband, modules, blobs, then the PT pieces. A piece left in the
// perf.data (keep_pt_bytes = false) is read from archive.path just before it is written, so that
// one piece at a time is in memory; a perf.data that changed since it was imported is an error
// naming it and the offset where its bytes end.
Status WriteImportedArchive(const Archive& archive, const std::string& out_path,
                            const WriterOptions& options);

// Writes `archive` as a perf.data (mode 0600), to a temporary file renamed over `out_path` when
// complete (a symbolic link at `out_path` is refused, never followed: output_file.h). Fails, naming the chunk or
// key, when the archive cannot be expressed (no PT data, mixed per-CPU and per-thread streams).
Status ExportPerfData(const Archive& archive, const std::string& out_path);
Result<std::vector<uint8_t>> ExportPerfDataToBytes(const Archive& archive);

}  // namespace ptscope::format
