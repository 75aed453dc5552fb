// The dynamic shared memory a task's tile takes (tile_layout.h), besides any copy of its weights:
// the host sizes every launch with it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tasks/graph.h"

namespace spindle::cuda {

// Attention's depends on the positions of scores and of K and V rows it holds at once.
size_t task_smem_bytes(const Graph& g, const SpTask& t, uint32_t score_positions, uint32_t kv_positions);

}  // namespace spindle::cuda
