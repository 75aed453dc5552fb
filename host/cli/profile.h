// Named configurations (`--profile`): which graph tiling and executor mode a command runs, so
// that the fastest measured one is the default and no user has to work out the knobs for it.
#pragma once
#include <string>

#include "host/cli/tuning.h"
#include "host/executor.h"
#include "host/graph_builder.h"
#include "host/model_config.h"

namespace spindle::cli {

enum class Profile {
  Fastest,  // the fastest configuration measured for the model and executor (the default)
  Plain,    // the builder's default tiling, the executor's default mode
  PerOp,    // plain's graph, cuda's one kernel an op
  Graph,    // plain's graph, cuda's CUDA graph of the per-op kernels
};

// Throws spindle::Error listing the names for an unknown one.
Profile parse_profile(const std::string& name);
const char* profile_name(Profile p);

// --profile, for the commands that run an executor.
void add_profile_option(CLI::App& cmd, std::string& profile);

// What a profile picks: the graph's tiling, the executor's settings, and a line saying which and
// why.
struct ProfileChoice {
  BuildOptions build;
  ExecutorOptions exec;
  std::string line;
};

// What `profile` picks for a model of `config` on `exec.kind` (resolved, not auto) at `context`
// positions, from `build` and `exec` as --tune left them (a knob in `tuned` keeps its value).
// Fastest on the cuda megakernel: the cluster program on its measured tiling where the model is
// one it was measured faster on (qwen3-0.6b's shape, at most 1024 positions, greedy); the caller
// still checks the built graph (cluster_program_problem) and falls back with plain_fallback.
ProfileChoice choose_profile(Profile profile, const ModelConfig& config, const BuildOptions& build,
                             const ExecutorOptions& exec, const TuneSettings& tuned, bool greedy, uint32_t context);

// The plain megakernel in place of a cluster choice whose graph the cluster program refused for
// `problem`.
ProfileChoice plain_fallback(Profile profile, const BuildOptions& build, const ExecutorOptions& exec,
                             const std::string& problem);

}  // namespace spindle::cli
