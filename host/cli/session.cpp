#include "host/cli/session.h"

#include <chrono>
#include <cstdio>

namespace spindle::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::unique_ptr<Session> open_session(const std::string& model, const BuildOptions& build) {
  auto s = std::make_unique<Session>();
  std::fprintf(stderr, "spindle: loading %s ...\n", model.c_str());
  auto t0 = std::chrono::steady_clock::now();
  s->weights = load_model(model, LoadOptions{.fill_host = false});
  if (s->weights.in_host_memory())
    std::fprintf(stderr, "spindle: loaded %.2f GB of weights in %.2f s\n", double(s->weights.total_bytes()) / 1e9,
                 seconds_since(t0));
  else
    std::fprintf(stderr, "spindle: laid out %.2f GB of synthetic weights (generated where they run) in %.2f s\n",
                 double(s->weights.total_bytes()) / 1e9, seconds_since(t0));
  t0 = std::chrono::steady_clock::now();
  s->graph = build_decode_graph(s->weights, build);
  std::fprintf(stderr,
               "spindle: built the decode graph (%zu tasks, %u counters, context %u) in %.2f s\n",
               s->graph.tasks.size(), s->graph.num_counters(), s->graph.params.context,
               seconds_since(t0));
  return s;
}

std::unique_ptr<Executor> open_executor(Session& s, const ExecutorOptions& opt) {
  if (opt.kind != ExecutorKind::Cuda && !s.weights.in_host_memory()) {
    // No executor holds the unfilled weights (host executors refuse them, the CUDA one keeps
    // nothing of them), so they can be replaced by the filled ones of the same layout.
    const auto t0 = std::chrono::steady_clock::now();
    s.weights = load_model(s.weights.source);
    std::fprintf(stderr, "spindle: generated %.2f GB of synthetic weights on the host in %.2f s\n",
                 double(s.weights.total_bytes()) / 1e9, seconds_since(t0));
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto ex = make_executor(s.graph, s.weights, opt);
  std::fprintf(stderr, "spindle: executor %s, ready in %.2f s\n", ex->describe().c_str(), seconds_since(t0));
  for (const PipelineStatistic& st : ex->pipeline_statistics())
    std::fprintf(stderr, "spindle: pipeline %s: %s = %s\n", st.executable.c_str(), st.name.c_str(), st.value.c_str());
  return ex;
}

}  // namespace spindle::cli
