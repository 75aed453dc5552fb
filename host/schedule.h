// Static schedules: per-worker task lists built on the host (HazyResearch's VM style).
#pragma once
#include <cstdint>
#include <vector>

#include "tasks/graph.h"

namespace spindle {

// Deals each stage's tasks round-robin over the workers, continuing where the previous stage
// stopped. Each list keeps the graph's topological order, which is what makes a static
// schedule deadlock-free when all workers run at once: the earliest unfinished task always
// has its dependencies done and its worker waiting on nothing before it.
std::vector<std::vector<uint32_t>> static_lists(const Graph& g, uint32_t workers);

}  // namespace spindle
