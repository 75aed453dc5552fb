// Timing, skipped by default (run with -tc='timing*' --no-skip): the dependency-hop latency of
// the Vulkan executor with either poll (shaders/protocol.glsl), from a chain of dependent
// one-column EMBED tasks, next to the threaded CPU executor's. docs/journal/sessions-01-61.md records what
// it measured.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "host/vulkan_executor.h"
#include "tests/executors_fixture.h"
#include "tests/vulkan_fixture.h"

using namespace spindle;

namespace {

// n tasks, each copying one column of the embedding and waiting for the one before; the first
// waits for the last of the previous step.
Graph chain_graph(const Graph& base, uint32_t n) {
  Graph g = base;
  g.tasks.clear();
  g.counter_names.clear();
  for (uint32_t i = 0; i < n; ++i) {
    SpTask t = base.tasks.front();  // the EMBED task
    t.tile_begin = 0;
    t.tile_end = 1;
    t.wait_counter = i == 0 ? n - 1 : i - 1;
    t.wait_count = 1;
    t.wait_mode = i == 0 ? SP_WAIT_PREV_STEP : SP_WAIT_SAME_STEP;
    t.signal_counter = i;
    g.tasks.push_back(t);
    g.counter_names.push_back("hop" + std::to_string(i));
  }
  validate(g);
  return g;
}

// Microseconds per task over `steps` steps of the chain, after one warm-up step.
double us_per_hop(Executor& ex, const Graph& g, uint32_t steps) {
  ex.state().token = 1;
  ex.run_steps(1);
  const auto t0 = std::chrono::steady_clock::now();
  ex.run_steps(steps);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return us / (double(steps) * g.tasks.size());
}

}  // namespace

TEST_CASE("timing: dependency-hop latency of a chain of trivial tasks" * doctest::skip()) {
  const TinyModel& m = tiny_model();
  constexpr uint32_t kHops = 256, kSteps = 20;
  const Graph g = chain_graph(m.graph, kHops);
  for (uint32_t workers : {1u, 2u, 4u}) {
    ExecutorOptions o = vulkan_options(workers);
    for (VulkanPoll poll : {VulkanPoll::AtomicAdd, VulkanPoll::Load}) {
      o.vulkan.poll = poll;
      VulkanExecutor ex(g, m.weights, o);
      const double vk = us_per_hop(ex, g, kSteps);
      MESSAGE(ex.describe() << ": " << vk << " us per hop, " << ex.last_run_dispatches() << " dispatches for "
                            << kSteps * kHops << " tasks");
    }
    o.kind = ExecutorKind::Threaded;
    auto cpu = make_executor(g, m.weights, o);
    MESSAGE(cpu->describe() << ": " << us_per_hop(*cpu, g, kSteps) << " us per hop");
  }
}
