// Issue 23 §3: pt-record's defects, each with a test against the kernel model that failed
// before its fix (the real-run tests are in tests/e2e/record).
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include "model_session.h"
#include "pt_stream.h"

namespace ptscope::record::testing {
namespace {


TEST_CASE("defect 2: an unprivileged user's rings fit the locked-page budget (perf_mmap)") {
  // perf_event_mlock_kb 516 × 2 CPUs = 258 pages per user, then ulimit -l 64 KiB = 16 pages.
  ModelHost host;
  host.rlimit_memlock = 64 * 1024;
  KernelModel model(host);
  ModelRun run(model, /*root=*/false);
  run.facts.rlimit_memlock = host.rlimit_memlock;
  run.session.argv = {"/bin/sleep", "30"};
  int step = 0, pid = -1;
  model.on_poll = [&](KernelModel& m) {
    if (step == 0) {
      pid = run.TargetPid();
      m.SchedIn(pid, pid, 0);
      m.WritePt(pid, MakePtStream(5000));
      m.SchedOut(pid);
    } else if (step == 1) {
      ::kill(::getpid(), SIGINT);
    }
    ++step;
  };
  auto summary = run.Run();
  KillTarget(pid);
  REQUIRE_MESSAGE(summary, summary.error().message);
  std::vector<format::PtDataChunk> pieces = ReadComplete(run.session.output).pt_data;
  REQUIRE(pieces.size() == 1);
  CHECK(pieces[0].data == MakePtStream(5000));
}

}  // namespace
}  // namespace ptscope::record::testing
