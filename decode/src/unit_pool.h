// Ordered parallel decoding: units are decoded on worker threads, at most `window` units ahead of
// the consumer, and handed to the consumer on the calling thread strictly in unit order. Memory
// therefore stays bounded by the window (not by the capture), and the output does not depend on
// the number of workers.
#pragma once

#include <cstddef>
#include <functional>

#include "flow_decoder.h"

namespace ptscope::decode {

// decode(unit, worker, out) runs on a worker (worker in [0, jobs)); consume(unit, events) runs on
// the calling thread in unit order. The calling thread is worker 0: beside jobs - 1 worker
// threads it decodes units itself while the one it must consume next is not ready. With
// jobs <= 1 everything runs on the calling thread, one unit at a time.
void RunOrdered(size_t units, unsigned jobs, size_t window,
                const std::function<void(size_t, unsigned, UnitEvents&)>& decode,
                const std::function<void(size_t, UnitEvents&)>& consume);

}  // namespace ptscope::decode
