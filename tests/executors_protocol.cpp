// The queue protocol's failure modes: a broken dependency ends with a clear error naming the
// task and counter, never a hang; bad input is refused before anything runs.
#include <doctest/doctest.h>

#include <algorithm>

#include "host/decode.h"
#include "tasks/error.h"
#include "tests/executors_fixture.h"

using namespace spindle;

TEST_CASE("a graph that cannot finish ends with a watchdog error, not a hang") {
  for (ScheduleKind sched : {ScheduleKind::Ticket, ScheduleKind::Static}) {
    CAPTURE(schedule_kind_name(sched));
    ExecutorOptions o{ExecutorKind::Threaded, 2, sched};
    o.watchdog_ms = 200;
    check_watchdog_trips(o, "earlier error");
  }
}

TEST_CASE("decode refuses ids past the vocabulary and runs past the context") {
  const TinyModel& m = tiny_model();
  auto ex = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
  CHECK_THROWS_WITH_AS(decode(*ex, m.graph, {1, 512}, 1, {}), doctest::Contains("id 512 at index 1 is out of range"),
                       Error);
  CHECK_THROWS_WITH_AS(decode(*ex, m.graph, {}, 1, {}), doctest::Contains("empty"), Error);
  CHECK_THROWS_WITH_AS(decode(*ex, m.graph, {1, 2, 3}, 62, {}), doctest::Contains("past the context limit of 64"),
                       Error);
  CHECK_NOTHROW(decode(*ex, m.graph, {1, 2, 3}, 61, {}));
  CHECK_THROWS_WITH_AS(decode(*ex, m.graph, {1, 2, 3}, 2, {}, 60),
                       doctest::Contains("from position 60 needs 65 positions, past the context limit of 64"), Error);
}

TEST_CASE("decode from a start position runs its steps there") {
  const TinyModel& m = tiny_model();
  auto ex = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
  decode(*ex, m.graph, {1, 2, 3}, 4, {}, 57);  // 6 steps (2 prefill, 4 new): the last start the context allows
  CHECK(ex->state().position == 63);
  decode(*ex, m.graph, {1, 2, 3}, 4, {});
  CHECK(ex->state().position == 6);
}

TEST_CASE("tracing records every task of every step once") {
  const TinyModel& m = tiny_model();
  auto ex = make_executor(m.graph, m.weights, {ExecutorKind::Threaded, 3, ScheduleKind::Ticket});
  ex->set_tracing(true);
  decode(*ex, m.graph, {1, 2}, 2, {});
  const auto& tr = ex->trace();
  REQUIRE(tr.size() == 3 * m.graph.tasks.size());
  std::vector<int> seen(tr.size(), 0);
  for (const TaskTrace& t : tr) {
    ++seen[t.step * m.graph.tasks.size() + t.task];
    CHECK(t.end_ns >= t.start_ns);
    CHECK(t.worker < 3);
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
}

TEST_CASE("a sequential trace times all its runs on one clock: each task starts after the one before ended") {
  const TinyModel& m = tiny_model();
  auto ex = make_executor(m.graph, m.weights, {ExecutorKind::Sequential});
  ex->set_tracing(true);
  decode(*ex, m.graph, {1, 2}, 2, {});  // more than one run: the prompt's steps, then the new tokens'
  const auto& tr = ex->trace();
  REQUIRE(tr.size() == 3 * m.graph.tasks.size());
  for (size_t i = 1; i < tr.size(); ++i) {
    CAPTURE(i);
    CHECK(tr[i].start_ns >= tr[i - 1].end_ns);
  }
}
