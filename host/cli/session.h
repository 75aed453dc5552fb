// A loaded model and its decode graph, which executors bind to; commands that run the model
// open one.
#pragma once
#include <memory>
#include <string>

#include "host/executor.h"
#include "host/graph_builder.h"
#include "host/model_weights.h"

namespace spindle::cli {

struct Session {
  ModelWeights weights;
  Graph graph;
};

// Loads the model and builds its graph, reporting each phase on stderr. Held by pointer:
// executors keep references into it.
std::unique_ptr<Session> open_session(const std::string& model, const BuildOptions& build);

// An executor for the session, named on stderr.
std::unique_ptr<Executor> open_executor(const Session& s, const ExecutorOptions& opt);

}  // namespace spindle::cli
