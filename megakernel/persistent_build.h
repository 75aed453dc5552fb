// Which build of the persistent kernel (tile_build.h) runs a graph.
#pragma once
#include "megakernel/tile_build.h"
#include "tasks/graph.h"

namespace spindle::cuda {

// The smallest build with a tile for every task: the plain build, else the MoE build, else the
// two-hop build; a GEMV with split dots needs the two-hop build (tile_projection.cuh run_gemv).
// Throws spindle::Error naming a task whose op no build has (the per-op kernels' alone).
TileBuild persistent_build(const Graph& g);

}  // namespace spindle::cuda
