// The persistent kernel's L2 prefetch plan. Weights do not depend on activations, and the
// recurrent state a GDN stage reads first is written by no earlier stage of the step, so both
// can be fetched while earlier stages run: each task, once it has run and released, asks the L2
// for a share of the bytes of the stage `distance` stages later (cp.async.bulk.prefetch.L2), so
// that stage's tiles find them in L2 instead of waiting a round trip to HBM for each group of
// rows (docs/EXPERIMENTS.md).
#pragma once
#include <cstdint>
#include <vector>

#include "megakernel/device_records.h"
#include "megakernel/per_op.h"
#include "tasks/graph.h"

namespace spindle::cuda {

// One L2Prefetch per task of g (bytes 0: none). `stages` are g's graph_stages (the runs of tasks
// with the same signal counter, which the executor builds once); the plan's stages are their
// op_runs, counted around the step, so the last stages prefetch for the next step's first
// ones. The target stage's weights (projection rows; an MLP member's gate and up rows and its
// piece-major down block, repack_down.h) and a GDN stage's state rows, in task order (the order
// tickets hand them out) and cut after `stage_budget` bytes, are merged into contiguous ranges,
// each range split into 16-byte-aligned pieces, at least one a range and otherwise in
// proportion to its bytes, and the pieces are handed to the prefetching stage's tasks in order;
// ranges left over when a stage has fewer tasks than ranges are not prefetched. Only weight
// arenas and the recurrent state are prefetched. distance 0 or stage_budget 0: no prefetch.
std::vector<L2Prefetch> plan_l2_prefetch(const Graph& g, const std::vector<Stage>& stages, uint32_t distance,
                                         uint64_t stage_budget);

}  // namespace spindle::cuda
