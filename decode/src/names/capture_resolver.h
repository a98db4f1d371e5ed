// The files of a capture's modules, found as every decode finds them: the archive's embedded
// copies first, then the recorded paths, --symbols directories and, when a URL is configured,
// debuginfod (symbols::ModuleResolver's order). RunPipeline and ListModulesJson both resolve
// through this one set-up, so `pt-decode --list-modules` reports exactly the files a decode with
// the same options uses.
#pragma once

#include "ptscope/decode.h"
#include "ptscope/symbols.h"

namespace ptscope::decode {

class CaptureResolver {
 public:
  explicit CaptureResolver(const PipelineOptions& options)
      : debuginfod_(symbols::DebuginfodFetcher::FromEnvironment({options.debuginfod_urls, 30})),
        resolver_(options.symbol_dirs) {
    if (debuginfod_.enabled()) resolver_.SetDebuginfod(&debuginfod_);
  }
  CaptureResolver(const CaptureResolver&) = delete;
  CaptureResolver& operator=(const CaptureResolver&) = delete;

  // The binaries, debug files and vdso copies the archive embeds, each loaded (read again from
  // the archive when it was read without them) only when it is used. `archive` must outlive
  // this resolver.
  Status AddArchiveBlobs(const format::Archive& archive) {
    for (size_t i = 0; i < archive.blobs.size(); ++i) {
      PTSCOPE_TRY(resolver_.AddBlob(archive.blobs[i], [&archive, i] {
        return format::LoadBlobData(archive, i);
      }));
    }
    return Ok();
  }
  symbols::ModuleResolver& resolver() { return resolver_; }

 private:
  symbols::DebuginfodFetcher debuginfod_;  // before resolver_: it must outlive the resolver
  symbols::ModuleResolver resolver_;
};

// What ResolvedModules keeps between decodes (RunPipeline makes one per decode otherwise).
struct ResolvedModules::State {
  explicit State(const PipelineOptions& options) : capture(options) {}
  CaptureResolver capture;
  symbols::Symbolizer symbolizer;
};

}  // namespace ptscope::decode
