#include "megakernel/per_op.h"

#include "megakernel/cuda_check.h"
#include "megakernel/device_failure.cuh"
#include "megakernel/run_device_task.cuh"
#include "tasks/gang.h"

namespace spindle::cuda {
namespace {

// Block b runs task first_task + b. The step is read from the state, which SAMPLE advances
// once per step, so the captured graph needs no per-step arguments. kOp: the stage's one
// opcode, whose tile alone the kernel holds (one kernel per op, as the conventional way has
// it: one holding every tile had the 8b's CUDA graph 0.7% slower), or 0 for a stage of several.
template <uint32_t kOp>
__global__ void __launch_bounds__(kBlockThreads) stage_kernel(DeviceGraph g, uint32_t first_task) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ uint32_t s_run, s_step;
  uint64_t start_ns = 0;
  if (threadIdx.x == 0) {
    start_ns = global_timer_ns();
    s_run = !run_aborted(g.control);
    s_step = g.control->step_base + load_data(&g.ctx.state->step) - g.control->state_step_base;
  }
  __syncthreads();
  if (!s_run) return;
  const TaskSite site{g.control, first_task + blockIdx.x, s_step};
  const SpTask t = g.tasks[site.task];
  run_device_task<TileBuild::kPerOp, kOp>(t, g.ctx, g, site, smem, nullptr);
  __syncthreads();
  if (threadIdx.x == 0) record_trace(g.control->trace, g.control->step_base, g.n_tasks, site, start_ns, global_timer_ns(), 0);
}

using StageKernel = void (*)(DeviceGraph, uint32_t);

// The kernel of a stage whose tasks are all `op` (0: of several ops).
StageKernel stage_kernel_for(uint32_t op) {
  switch (op) {
#define SP_STAGE_KERNEL_(NAME, name, value, executors) \
  case value: return stage_kernel<value>;
    SP_OPS(SP_STAGE_KERNEL_)
#undef SP_STAGE_KERNEL_
    default: return stage_kernel<0>;
  }
}

}  // namespace

std::vector<Stage> graph_stages(const Graph& g) {
  std::vector<Stage> stages;
  for (uint32_t i = 0; i < g.tasks.size(); ++i) {
    if (stages.empty() || g.tasks[i].signal_counter != g.tasks[stages.back().first_task].signal_counter)
      stages.push_back({i, 0, 0, g.tasks[i].op});
    ++stages.back().tasks;
    if (g.tasks[i].op != stages.back().op) stages.back().op = 0;
  }
  return stages;
}

std::vector<Stage> op_runs(const Graph& g, const std::vector<Stage>& stages) {
  std::vector<Stage> runs;
  for (const Stage& st : stages) {
    const SpTask& t = g.tasks[st.first_task];
    const SpTask* last = runs.empty() ? nullptr : &g.tasks[runs.back().first_task];
    if (last && last->op == t.op && last->layer == t.layer && sp_gang_width(t) == 1 && sp_gang_width(*last) == 1) {
      runs.back().tasks += st.tasks;
      if (runs.back().op != st.op) runs.back().op = 0;
    }
    else runs.push_back(st);
  }
  return runs;
}

void prepare_stage_kernel(size_t smem) {
  SP_CUDA(cudaFuncSetAttribute(stage_kernel_for(0), cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  for (uint32_t op = 1; op < SP_OP_COUNT_; ++op)
    SP_CUDA(cudaFuncSetAttribute(stage_kernel_for(op), cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
}

void launch_step_per_op(const DeviceGraph& g, const std::vector<Stage>& stages, cudaStream_t stream) {
  for (const Stage& s : stages) {
    stage_kernel_for(s.op)<<<s.tasks, kBlockThreads, s.smem, stream>>>(g, s.first_task);
    cuda_check(cudaGetLastError(), "stage_kernel<<<>>>");
  }
}

}  // namespace spindle::cuda
