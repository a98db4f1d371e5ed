// Ordered parallel decoding: units are decoded on worker threads, at most `window` units ahead of
// the consumer, and handed to the consumer on the calling thread strictly in unit order. Memory
// therefore stays bounded by the window (not by the capture), and the output does not depend on
// the number of workers. The units are not known in advance: they are planned one at a time, as
// the workers need them, so planning overlaps decoding and nothing is held for the whole capture.
#pragma once

#include <cstddef>
#include <functional>

#include "flow/unit_events.h"

namespace ptscope::decode {

// plan(unit) prepares units 0, 1, 2, ... in turn (on whichever thread needs one, never two at
// once) and returns false when there are no more; it is not called again after that. At most
// `window` units (>= 1) are planned and not yet consumed at any time, so a caller can keep them in
// a ring of `window` slots, unit i in slot i % window. decode(unit, worker, out) runs on a worker
// (worker in [0, jobs)); consume(unit, events) runs on the calling thread in unit order. The
// calling thread is worker 0: beside jobs - 1 worker threads it decodes units itself while the one
// it must consume next is not ready. With jobs <= 1 everything runs on the calling thread, one
// unit at a time.
void RunOrdered(unsigned jobs, size_t window, const std::function<bool(size_t)>& plan,
                const std::function<void(size_t, unsigned, UnitEvents&)>& decode,
                const std::function<void(size_t, UnitEvents&)>& consume);

}  // namespace ptscope::decode
