// Ordered worker pool (see unit_pool.h).
#include "parallel/unit_pool.h"

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace ptscope::decode {

void RunOrdered(unsigned jobs, size_t window, const std::function<bool(size_t)>& plan,
                const std::function<void(size_t, unsigned, UnitEvents&)>& decode,
                const std::function<void(size_t, UnitEvents&)>& consume) {
  if (window == 0) window = 1;
  if (jobs <= 1) {
    UnitEvents events;  // reused: its vectors keep their capacity from unit to unit
    for (size_t i = 0; plan(i); ++i) {
      events.Reset();
      decode(i, 0, events);
      consume(i, events);
    }
    return;
  }
  std::mutex mutex;
  std::condition_variable changed;
  // Slot i % window holds unit i from its claim to its consumption.
  std::vector<std::unique_ptr<UnitEvents>> results(window);
  std::vector<bool> done(window, false);
  size_t units = SIZE_MAX;  // known once plan() has said there are no more
  size_t next = 0;          // next unit to hand to a worker
  size_t consumed = 0;      // units the consumer has finished
  // Consumed buffers go back to the workers: allocating fresh ones for every unit made the
  // kernel clear new pages for each (a fifth of a decode's time).
  std::vector<std::unique_ptr<UnitEvents>> spare;
  // Claims the next unit inside the window (with the lock held), planning it; false when there is
  // none for now (window full) or at all (units known).
  auto claim = [&](size_t* unit, std::unique_ptr<UnitEvents>* events) {
    if (next >= units || next >= consumed + window) return false;
    if (!plan(next)) {
      units = next;
      changed.notify_all();  // the consumer and idle workers may be waiting for a unit
      return false;
    }
    *unit = next++;
    if (!spare.empty()) {
      *events = std::move(spare.back());
      spare.pop_back();
    }
    return true;
  };
  // Decodes a claimed unit (without the lock) and hands in the result.
  auto run = [&](size_t unit, std::unique_ptr<UnitEvents> events, unsigned worker) {
    if (events == nullptr) events = std::make_unique<UnitEvents>();
    decode(unit, worker, *events);
    {
      std::lock_guard<std::mutex> lock(mutex);
      results[unit % window] = std::move(events);
      done[unit % window] = true;
    }
    changed.notify_all();
  };
  // jobs - 1 worker threads; the calling thread is worker 0: it consumes in order and, while the
  // unit it waits for is not decoded yet, decodes one itself. So --jobs N keeps N threads busy
  // (N workers beside a consumer would be one more thread than cores).
  std::vector<std::thread> workers;
  for (unsigned worker = 1; worker < jobs; ++worker) {
    // A thread the system refuses (RLIMIT_NPROC, memory) is one worker fewer, not a failure: the
    // units are the same and so is the output. std::thread reports it only by throwing.
    try {
      workers.emplace_back([&, worker] {
        for (;;) {
          size_t unit;
          std::unique_ptr<UnitEvents> events;
          {
            std::unique_lock<std::mutex> lock(mutex);
            changed.wait(lock, [&] { return next >= units || next < consumed + window; });
            if (!claim(&unit, &events)) {
              if (next >= units) return;
              continue;
            }
          }
          run(unit, std::move(events), worker);
        }
      });
    } catch (const std::system_error&) {
      break;
    }
  }
  for (size_t i = 0;; ++i) {
    std::unique_ptr<UnitEvents> events;
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex);
      if (i >= units) break;
      if (i < next && done[i % window]) {
        events = std::move(results[i % window]);
        done[i % window] = false;
        break;
      }
      size_t unit;
      std::unique_ptr<UnitEvents> claimed;
      if (claim(&unit, &claimed)) {
        lock.unlock();
        run(unit, std::move(claimed), 0);
        continue;
      }
      changed.wait(lock, [&] {
        return i >= units || (i < next && done[i % window]) ||
               (next < units && next < consumed + window);
      });
    }
    if (events == nullptr) break;  // i == units: all consumed
    consume(i, *events);
    events->Reset();
    {
      std::lock_guard<std::mutex> lock(mutex);
      consumed = i + 1;
      spare.push_back(std::move(events));
    }
    changed.notify_all();
  }
  for (std::thread& worker : workers) worker.join();
}

}  // namespace ptscope::decode
