// The kernel-per-op baseline: one launch per stage (the tasks that signal one counter are
// contiguous in the graph), one block per task, ordered by the stream instead of counters.
// The same launches captured once into a CUDA graph make the graph baseline.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "megakernel/device_records.h"
#include "tasks/graph.h"

namespace spindle::cuda {

struct Stage {
  uint32_t first_task, tasks;
  size_t smem = 0;  // dynamic shared memory of its launch: what its tiles need
  uint32_t op = 0;  // the opcode of all its tasks, 0 when they have several
};

// The graph's runs of consecutive tasks with the same signal counter, in order. Launched in
// this order they respect every dependency, since the tasks are in topological order.
std::vector<Stage> graph_stages(const Graph& g);

// `stages` (graph_stages) with each run of consecutive stages of one op and layer joined: a
// layer's stages a kv head (BuildOptions::kv_head_waits) as its one stage. The units the
// megakernel's tickets and L2 prefetch plan count, so that splitting a stage's counter changes
// neither. Stages of gang tasks are never joined: a block's ticket quota of a joined run could
// hand it two members of one gang, whose barrier would then wait for itself.
std::vector<Stage> op_runs(const Graph& g, const std::vector<Stage>& stages);

// Raises the stage kernel's shared-memory limit to `smem`.
void prepare_stage_kernel(size_t smem);

// One step: every stage, in order, on `stream`, each with its own shared memory.
void launch_step_per_op(const DeviceGraph& g, const std::vector<Stage>& stages, cudaStream_t stream);

}  // namespace spindle::cuda
