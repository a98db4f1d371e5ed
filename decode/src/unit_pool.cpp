// Ordered worker pool (see unit_pool.h).
#include "unit_pool.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ptscope::decode {

void RunOrdered(size_t units, unsigned jobs, size_t window,
                const std::function<void(size_t, unsigned, UnitEvents&)>& decode,
                const std::function<void(size_t, UnitEvents&)>& consume) {
  if (jobs <= 1 || units <= 1) {
    for (size_t i = 0; i < units; ++i) {
      UnitEvents events;
      decode(i, 0, events);
      consume(i, events);
    }
    return;
  }
  if (window < jobs) window = jobs;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::unique_ptr<UnitEvents>> results(units);
  std::vector<bool> done(units, false);
  size_t next = 0;      // next unit to hand to a worker
  size_t consumed = 0;  // units the consumer has finished
  std::vector<std::thread> workers;
  for (unsigned worker = 0; worker < jobs; ++worker) {
    workers.emplace_back([&, worker] {
      for (;;) {
        size_t unit;
        {
          std::unique_lock<std::mutex> lock(mutex);
          changed.wait(lock, [&] { return next >= units || next < consumed + window; });
          if (next >= units) return;
          unit = next++;
        }
        auto events = std::make_unique<UnitEvents>();
        decode(unit, worker, *events);
        {
          std::lock_guard<std::mutex> lock(mutex);
          results[unit] = std::move(events);
          done[unit] = true;
        }
        changed.notify_all();
      }
    });
  }
  for (size_t i = 0; i < units; ++i) {
    std::unique_ptr<UnitEvents> events;
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return done[i]; });
      events = std::move(results[i]);
    }
    consume(i, *events);
    events.reset();
    {
      std::lock_guard<std::mutex> lock(mutex);
      consumed = i + 1;
    }
    changed.notify_all();
  }
  for (std::thread& worker : workers) worker.join();
}

}  // namespace ptscope::decode
