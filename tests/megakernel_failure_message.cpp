// The words the host gives a failure the kernels recorded (megakernel/failure_message.h): each
// kind names the task by index and opcode and the step, and what was wrong in the graph's terms.
#include <doctest/doctest.h>

#include <string>

#include "megakernel/failure_message.h"
#include "tests/executors_fixture.h"

using namespace spindle;
using cuda::DeviceFailure;
using cuda::failure_message;

namespace {

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

// A task of tiny's graph that waits on a counter.
uint32_t waiting_task(const Graph& g) {
  for (uint32_t t = 0; t < g.tasks.size(); ++t)
    if (g.tasks[t].wait_counter != SP_NO_COUNTER && g.tasks[t].op == SP_OP_ATTENTION) return t;
  FAIL("tiny's graph has no attention task that waits");
  return 0;
}

}  // namespace

TEST_CASE("a watchdog failure names the task, its op, the step, and the counter by name with its value and target") {
  const Graph& g = tiny_model().graph;
  const uint32_t t = waiting_task(g), counter = g.tasks[t].wait_counter;
  const std::string msg = failure_message({cuda::kFailWatchdog, t, 3, counter, 5, 7}, g, 250);
  CAPTURE(msg);
  CHECK(has(msg, "task " + std::to_string(t) + " (attention) of step 3 waited over 250 ms"));
  CHECK(has(msg, "on counter " + std::to_string(counter) + " (" + g.counter_names[counter] + "): value 5, needs 7"));
}

TEST_CASE("a cluster program's wait on no graph counter says what it waited for, not a counter") {
  const Graph& g = tiny_model().graph;
  const uint32_t t = waiting_task(g);
  const std::string msg = failure_message({cuda::kFailWatchdog, t, 0, SP_NO_COUNTER, 0, 0}, g, 60000);
  CAPTURE(msg);
  CHECK(has(msg, "task " + std::to_string(t) + " (attention) of step 0 waited over 60000 ms"));
  CHECK(has(msg, "weights to land in shared memory"));
  CHECK(has(msg, "cluster barrier"));
  CHECK_FALSE(has(msg, "counter " + std::to_string(SP_NO_COUNTER)));
}

TEST_CASE("range failures and gang stalls name their values, an unknown task or kind is said to be unknown") {
  const Graph& g = tiny_model().graph;
  const uint32_t t = waiting_task(g);
  CHECK(has(failure_message({cuda::kFailTokenRange, 0, 1, 0, 900, 512}, g, 1),
            "task 0 (embed) of step 1: token 900 is not below the embedding's 512 rows"));
  CHECK(has(failure_message({cuda::kFailPositionRange, t, 2, 0, 64, 64}, g, 1),
            "(attention) of step 2: position 64 is past the KV capacity of 64"));
  CHECK(has(failure_message({cuda::kFailStepRange, t, 9, 0, 9, 8}, g, 1), "step 9 is past the 8 out-token slots"));
  CHECK(has(failure_message({cuda::kFailGangWatchdog, t, 0, 2, 3, 4}, g, 10), "rank 2 of a gang of"));
  const uint32_t past = uint32_t(g.tasks.size());
  CHECK(has(failure_message({cuda::kFailTokenRange, past, 0, 0, 1, 1}, g, 1), "task " + std::to_string(past) + " (?)"));
  CHECK(has(failure_message({77, 0, 0, 0, 0, 0}, g, 1), "unknown device failure 77"));
}
