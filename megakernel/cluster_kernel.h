// The cluster program's persistent kernel (cluster_program.h, docs/two-hop-layer.md): one
// launch of `clusters` clusters of 8 blocks runs `steps` decode steps of a graph built for it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "megakernel/cluster_program.h"

namespace spindle::cuda {

struct ClusterLaunch {
  uint32_t first_step;      // executor step of the launch's first step (failure reports)
  uint32_t first_position;  // that step's position; every step adds one
  uint32_t steps;
  uint32_t flag_base;       // the exchange words' flags of this launch are flag_base + 1 on
  uint32_t clusters;
  uint64_t watchdog_ns;     // a wait longer than this fails the run
  uint32_t score_positions, kv_positions;  // attention's shared memory (tile_layout.h)
  uint32_t ring_slots;                     // a front block's weight ring's 16-KB slots (weight_ring.cuh)
  uint32_t mlp_ring_slots;                 // an MLP-only block's, whose ring also takes attention's area
};

// The launch's dynamic shared memory: all that the kernel's static shared memory leaves of
// `limit` bytes (a block's), so that a launch whose positions are short gives its rings every
// slot attention does not need (12 slots where the graph's layout rounded
// to 11, -2% a token at position 1); attention's tile area, the program's buffers, then as many
// weight ring slots as fit in it, and the slots an MLP-only block's ring has in the same bytes.
struct ClusterSmem {
  size_t bytes;
  uint32_t ring_slots, mlp_ring_slots;
};
ClusterSmem cluster_kernel_smem(const SpGraphParams& p, uint32_t score_positions, uint32_t kv_positions,
                                size_t limit);
// The slots of both rings in `bytes` (cluster_kernel_smem's) when attention's tile area is sized
// for score_positions and kv_positions: a launch whose positions are all short needs less of it.
ClusterSmem cluster_ring_slots(const SpGraphParams& p, uint32_t score_positions, uint32_t kv_positions, size_t bytes);

// Clusters of 8 that can be co-resident with `smem` bytes of dynamic shared memory a block.
uint32_t cluster_kernel_max_clusters(size_t smem);

void launch_cluster_kernel(const ClusterProgram& program, const ClusterLaunch& launch, size_t smem,
                           cudaStream_t stream);

}  // namespace spindle::cuda
