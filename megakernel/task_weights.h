// A task's weights as byte ranges of their arenas, as the persistent kernel reads them: the L2
// prefetch plan and the shared-memory copies (task_copies.h) both start from here.
#pragma once
#include <cstdint>
#include <vector>

#include "tasks/graph.h"

namespace spindle::cuda {

struct WeightSpan {
  uint32_t arena;
  uint64_t begin, end;  // bytes of the arena
};

// A projection's rows of each matrix (from the first row's start to the last row's end; for a
// GEMV piece, whose rows are some of the matrix's columns, every column between); an MLP
// member's gate and up rows and its block of the down weight, which the persistent kernel holds
// piece-major (repack_down.h). None for other tasks.
std::vector<WeightSpan> task_weight_spans(const Graph& g, const SpTask& t);

}  // namespace spindle::cuda
