// A loaded model and its decode graph, which executors bind to; commands that run the model
// open one.
#pragma once
#include <memory>
#include <string>

#include "host/cli/options.h"
#include "host/cli/profile.h"
#include "host/executor.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"

namespace spindle::cli {

struct Session {
  ModelWeights weights;
  Graph graph;
};

// Loads the model and builds its graph, reporting each phase on stderr. Held by pointer:
// executors keep references into it. A synthetic preset is loaded unfilled (its layout only,
// LoadOptions::fill_host = false): the graph needs no values, the CUDA executor generates
// them on the device, and open_executor generates them on the host only for an executor
// that runs there. So `spindle run -e cuda` of a 16 GB preset spends no host memory on it,
// and `info` or `graph` none at all.
std::unique_ptr<Session> open_session(const std::string& model, const BuildOptions& build);

// The session of a command whose run needs `positions` positions (`from` names the options they
// come from), and the executor settings for `flags`' profile (host/cli/profile.h) with --tune
// applied, the profile's choice named on stderr. `greedy`: whether the run samples greedily.
// With source.file, the graph saved there, refused unless it holds that many positions and was
// built for the model (check_replay, host/replay_check.h), the file read before the model; it
// keeps its tiling: --tune's tiling knobs are refused, and the profile picks the cuda mode alone.
// Else a graph built for the model at source.context positions, or at `positions` when that is 0.
struct ProfiledSession {
  std::unique_ptr<Session> session;
  ExecutorOptions exec;
  Profile profile;
  std::string choice;  // the line naming what the profile picked and why
};
ProfiledSession open_profiled_session(const std::string& model, const GraphSource& source, const ExecutorFlags& flags,
                                      uint64_t positions, const std::string& from, bool greedy);

// An executor for the session, named on stderr with the seconds it took to make (the CUDA
// executor's include putting the weights on the device), and its pipeline statistics where
// the driver reports them (one line each). Fills the session's weights on the
// host first when the executor runs there and they are not yet.
std::unique_ptr<Executor> open_executor(Session& s, const ExecutorOptions& opt);

}  // namespace spindle::cli
