#include "host/cli/session.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "host/cli/profile.h"
#include "host/replay_check.h"
#ifdef SPINDLE_HAVE_CUDA
#include "megakernel/cluster_program.h"
#endif
#include "tasks/error.h"
#include "tasks/graph_file.h"

namespace spindle::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The model's weights, unfilled where that is possible (see open_session).
ModelWeights load_weights(const std::string& model) {
  std::fprintf(stderr, "spindle: loading %s ...\n", model.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  ModelWeights w = load_model(model, LoadOptions{.fill_host = false});
  if (w.in_host_memory())
    std::fprintf(stderr, "spindle: loaded %.2f GB of weights in %.2f s\n", double(w.total_bytes()) / 1e9,
                 seconds_since(t0));
  else
    std::fprintf(stderr, "spindle: laid out %.2f GB of synthetic weights (generated where they run) in %.2f s\n",
                 double(w.total_bytes()) / 1e9, seconds_since(t0));
  return w;
}

}  // namespace

std::unique_ptr<Session> open_session(const std::string& model, const BuildOptions& build) {
  auto s = std::make_unique<Session>();
  s->weights = load_weights(model);
  const auto t0 = std::chrono::steady_clock::now();
  s->graph = build_decode_graph(s->weights, build);
  std::fprintf(stderr,
               "spindle: built the decode graph (%zu tasks, %u counters, context %u) in %.2f s\n",
               s->graph.tasks.size(), s->graph.num_counters(), s->graph.params.context,
               seconds_since(t0));
  return s;
}

namespace {

// The session of a run of `positions` positions (`from` names the options they come from) on the
// graph saved in `file`, refused unless it holds that many positions and was built for the model
// (check_replay, host/replay_check.h); the file is read before the model.
std::unique_ptr<Session> open_saved_graph_session(const std::string& model, const std::string& file,
                                                  uint64_t positions, const std::string& from) {
  auto s = std::make_unique<Session>();
  const auto t0 = std::chrono::steady_clock::now();
  s->graph = load_graph(file);
  const Graph& g = s->graph;
  std::fprintf(stderr, "spindle: read the decode graph from %s (built from %s; %zu tasks, %u counters, context %u) "
               "in %.2f s\n", file.c_str(), g.model.c_str(), g.tasks.size(), g.num_counters(),
               g.params.context, seconds_since(t0));
  if (positions > g.params.context)
    throw Error(from + " need " + std::to_string(positions) + " positions, more than the context of --graph " +
                file + ", " + std::to_string(g.params.context) + " (save the graph again with --context " +
                std::to_string(positions) + " or more)");
  s->weights = load_weights(model);
  try {
    check_replay(g, s->weights);
  } catch (const Error& e) {
    throw Error("--graph " + file + ", built from " + g.model + ", does not fit --model " + model + ": " +
                e.what());
  }
  return s;
}

}  // namespace

ProfiledSession open_profiled_session(const std::string& model, const GraphSource& source, const ExecutorFlags& flags,
                                      uint64_t positions, const std::string& from, bool greedy) {
  const Profile profile = parse_profile(flags.profile);
  ExecutorOptions exec = executor_options(flags);
  if (!source.file.empty()) {
    if (flags.split.devices != 1 || flags.split.expert_parallel)
      throw Error("--devices and --expert-parallel split a graph built here; --graph " + source.file +
                  " runs the saved graph over the devices it was built for");
    ExecutorOptions no_exec;
    apply_tune(flags.tune, nullptr, &no_exec, "the graph is read from --graph " + source.file);
    if (profile == Profile::PerOp || profile == Profile::Graph)
      exec = choose_profile(profile, {}, {}, exec, flags.tune, greedy, 0).exec;
    const std::string choice =
        std::string("profile ") + profile_name(profile) + ": the graph read from " + source.file + ", with its own tiling";
    std::fprintf(stderr, "spindle: %s\n", choice.c_str());
    return {open_saved_graph_session(model, source.file, positions, from), exec, profile, choice};
  }
  BuildOptions build;
  ExecutorOptions no_exec;
  apply_tune(flags.tune, &build, &no_exec);
  build.context = source.context ? source.context : needed_context(positions, from);
  auto s = std::make_unique<Session>();
  s->weights = load_weights(model);
  ProfileChoice choice = choose_profile(profile, s->weights.config, build, exec, flags.tune, greedy, build.context);
  flags.split.apply_to(choice.build);
  s->graph = build_decode_graph(s->weights, choice.build);
#ifdef SPINDLE_HAVE_CUDA
  if (choice.exec.megakernel.cluster_program && !flags.tune.has("cuda-cluster"))
    if (const std::string problem = cuda::cluster_program_problem(s->graph); !problem.empty()) {
      choice = plain_fallback(profile, build, exec, problem);
      s->graph = build_decode_graph(s->weights, choice.build);
    }
#endif
  std::fprintf(stderr, "spindle: built the decode graph (%zu tasks, %u counters, context %u)\n", s->graph.tasks.size(),
               s->graph.num_counters(), s->graph.params.context);
  std::fprintf(stderr, "spindle: %s\n", choice.line.c_str());
  return {std::move(s), choice.exec, profile, choice.line};
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
