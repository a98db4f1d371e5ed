// The planner, the worker pool and the unit decoder put together (see decode_units.h).
#include "parallel/decode_units.h"

#include <algorithm>

#include "flow/unit_decoder.h"
#include "parallel/unit_planner.h"
#include "parallel/unit_pool.h"

namespace ptscope::decode {
namespace {
constexpr size_t kDefaultUnitBytes = 16 * 1024;
}  // namespace

size_t UnitsInFlight(unsigned jobs) { return 2 * static_cast<size_t>(std::max(1u, jobs)) + 2; }

DecodedUnits DecodeUnits(
    CaptureView& view, const TimeWindow& window, const std::string& path,
    const std::vector<std::unique_ptr<CodeImages>>& images, CodeFacts* code,
    const PipelineOptions& options,
    const std::function<void(size_t, const WorkUnit&, UnitEvents&)>& consume,
    const std::function<void(size_t, const WorkUnit&, unsigned, UnitEvents&)>& after_decode) {
  const size_t unit_bytes = options.unit_bytes != 0 ? options.unit_bytes : kDefaultUnitBytes;
  UnitPlanner planner(view.streams, view.setup, view.config, unit_bytes, path, window.from_ns,
                      window.to_ns);
  std::vector<const CodeImages*> worker_images;
  for (const auto& image : images) worker_images.push_back(image.get());
  UnitDecoder decoder(view.setup, view.timeline, view.streams, std::move(worker_images), code,
                      options.walker, options.format == OutputFormat::kInsns);
  const unsigned jobs = static_cast<unsigned>(images.size());
  const size_t in_flight = UnitsInFlight(jobs);
  std::vector<WorkUnit> plan(in_flight);  // unit i in plan[i % in_flight] (see RunOrdered)
  RunOrdered(
      jobs, in_flight, [&](size_t index) { return planner.Next(&plan[index % in_flight]); },
      [&](size_t index, unsigned worker, UnitEvents& out) {
        decoder.Decode(plan[index % in_flight], worker, out);
        if (after_decode) after_decode(index, plan[index % in_flight], worker, out);
      },
      [&](size_t index, UnitEvents& events) {
        const WorkUnit& work = plan[index % in_flight];
        if (options.progress) options.progress(work.planned_bytes, planner.total_bytes());
        consume(index, work, events);
      });
  DecodedUnits decoded{{}, decoder.units(), decoder.libipt_units(), decoder.packet_units()};
  for (size_t s = 0; s < view.streams.size(); ++s) decoded.planned.push_back(planner.planned(s));
  return decoded;
}

}  // namespace ptscope::decode
