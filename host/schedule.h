// Static schedules: per-worker task lists built on the host (HazyResearch's VM style).
#pragma once
#include <cstdint>
#include <vector>

#include "tasks/graph.h"

namespace spindle {

// Deals the tasks (indices in the graph's topological order: all of a graph's, or those one of
// its devices runs) round-robin over the workers, each stage continuing where the previous one
// stopped. Each list keeps the graph's order, which is what makes a static schedule
// deadlock-free when all workers run at once: the earliest unfinished task always has its
// dependencies done and its worker waiting on nothing before it.
std::vector<std::vector<uint32_t>> static_lists(const std::vector<uint32_t>& tasks, uint32_t workers);

// The tasks device d runs (graph.h runs_on), in the graph's order: every task of a one-device graph.
std::vector<uint32_t> device_tasks(const Graph& g, uint32_t device);

}  // namespace spindle
