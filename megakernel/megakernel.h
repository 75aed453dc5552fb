// The persistent kernel: one launch runs `steps` decode steps of the whole graph, each block
// fetching tasks (ticket or static list), waiting on their counters and running their tiles.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "megakernel/device_records.h"
#include "megakernel/tile_build.h"

namespace spindle::cuda {

struct MegakernelLaunch {
  uint32_t first_step;      // executor step of the launch's first step
  uint32_t first_position;  // that step's position; every step adds one (advance_step)
  uint32_t steps;
  uint32_t input_cache;     // a task whose normalised input the block already holds skips it
  uint32_t merge_release;   // static lists: one release for consecutive tasks of one stage
  Backoff backoff;          // between polls of a counter, and the watchdog's bound
  uint32_t preload_bytes;  // plain and MoE builds: a projection task's weights up to this size are
                           // copied into shared memory before its wait (0 = never), when they fit in
  uint32_t smem_bytes;     // the launch's dynamic shared memory (two-hop build: the host's
                           // StagedTask::copy says which)
  uint32_t* stage_claims;  // ticket schedule: claims made of stage s in the launch's step k at
                           // [k * n_stages + s], zeroed before the launch
};

// The kernel has builds (tile_build.h): the plain build, with registers for `min_blocks_per_sm`
// (1 or 2) blocks an SM; the MoE build (the plain build's tiles but GATE_UP, with the routed
// experts') and the two-hop build (every tile), 1 block an SM only. Each leaves out what the
// smaller graphs do not need, so that they pay nothing for it.

// Blocks of a build one SM can hold at once with `smem` bytes of dynamic shared memory. Raises
// that build's shared-memory limit to `smem` first.
uint32_t megakernel_blocks_per_sm(uint32_t min_blocks_per_sm, TileBuild build, size_t smem);

// The static shared memory of a build: what a block has beside the dynamic part.
size_t megakernel_static_smem(uint32_t min_blocks_per_sm, TileBuild build);

// The grid must be co-resident (the caller clamps it): for the static schedule, and for gangs
// whose members run at once (DeviceGraph::gang_counters).
void launch_megakernel(const DeviceGraph& g, uint32_t min_blocks_per_sm, TileBuild build, uint32_t blocks, size_t smem,
                       const MegakernelLaunch& launch, cudaStream_t stream);

}  // namespace spindle::cuda
