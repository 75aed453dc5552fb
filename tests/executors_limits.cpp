// The executors' limits on their worker counts, refused up front with the option and the limit.
#include <doctest/doctest.h>

#include <string>

#include "host/cpu_executors.h"
#include "tests/executors_fixture.h"

using namespace spindle;

TEST_CASE("the threaded executor takes at most kMaxWorkers workers, naming --workers and the limit") {
  const TinyModel& m = tiny_model();
  ExecutorOptions o;
  o.kind = ExecutorKind::Threaded;
  o.workers = ThreadedExecutor::kMaxWorkers + 1;
  CHECK(error_of([&] { make_executor(m.graph, m.weights, o); }) ==
        "threaded executor: --workers 4097 is more than 4096, the most threads it starts (one a worker)");
  o.workers = ThreadedExecutor::kMaxWorkers;  // its threads start with each run
  CHECK(make_executor(m.graph, m.weights, o)->worker_count() == ThreadedExecutor::kMaxWorkers);
}
