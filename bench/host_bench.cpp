// Host-side costs: building a graph, one decode step through the CPU executors (the queue
// protocol's overhead shows at the tiny size), and the canonical dot product's throughput.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "host/decode.h"
#include "host/graph_builder.h"
#include "ops/bf16.h"
#include "ops/dot.h"

using namespace spindle;

namespace {

const ModelWeights& tiny() {
  static const ModelWeights w = load_model("synthetic:tiny");
  return w;
}

void BM_BuildGraph(benchmark::State& st) {
  BuildOptions o;
  o.context = 256;
  for (auto _ : st) benchmark::DoNotOptimize(build_decode_graph(tiny(), o));
}
BENCHMARK(BM_BuildGraph);

// One decode step of the tiny model: mostly per-task overhead (fetch, wait, signal).
void BM_TinyStep(benchmark::State& st) {
  BuildOptions o;
  o.context = 256;
  const Graph g = build_decode_graph(tiny(), o);
  ExecutorOptions eo{st.range(0) == 0 ? ExecutorKind::Sequential : ExecutorKind::Threaded, uint32_t(st.range(0)),
                     ScheduleKind::Ticket};
  auto ex = make_executor(g, tiny(), eo);
  decode(*ex, g, {1}, 0, {});
  uint32_t steps = 0;
  for (auto _ : st) {
    if (++steps == 200) {  // stay inside the context
      st.PauseTiming();
      decode(*ex, g, {1}, 0, {});
      steps = 1;
      st.ResumeTiming();
    }
    ex->run_steps(1);
  }
  st.counters["tasks/s"] = benchmark::Counter(double(st.iterations()) * g.tasks.size(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TinyStep)->Arg(0)->Arg(1)->Arg(2)->ArgName("workers(0=sequential)")->UseRealTime();

void BM_CanonicalDot(benchmark::State& st) {
  const int n = int(st.range(0));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<bf16> w(n);
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) {
    w[i] = f32_to_bf16(u(rng));
    x[i] = u(rng);
  }
  for (auto _ : st)
    benchmark::DoNotOptimize(canonical_dot<float>(n, [&](int k) { return bf16_to_f32(w[k]); },
                                                  [&](int k) { return x[k]; }));
  st.SetBytesProcessed(int64_t(st.iterations()) * n * 2);
}
BENCHMARK(BM_CanonicalDot)->Arg(1024)->Arg(4096);

}  // namespace
