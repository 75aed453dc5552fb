// The graph file (.sptg): a graph saved whole, to be reloaded, replayed or dumped without the
// model. Layout in docs/graph-format.md.
#pragma once
#include <filesystem>

#include <nlohmann/json_fwd.hpp>

#include "tasks/graph.h"

namespace spindle {

// Throws spindle::Error when the graph is inconsistent (validate()) or the file cannot be
// written.
void save_graph(const std::filesystem::path& path, const Graph& g);

// Throws spindle::Error naming the file and what is wrong: missing, bad magic, unsupported
// version, truncated, checksum mismatch, bad metadata, or an inconsistent graph (validate()).
Graph load_graph(const std::filesystem::path& path);

// Everything in the graph, readable: params, arenas, counters, named views, and tasks with
// opcode names, waits and signals by counter name, and view operands by view name.
// Validates the graph first.
nlohmann::json graph_to_json(const Graph& g);

}  // namespace spindle
