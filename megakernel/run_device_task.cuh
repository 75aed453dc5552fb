// The device tile dispatch shared by the persistent kernel and the per-op baselines: one
// block runs one task's tiles. Opcodes are checked on the host before any launch.
#pragma once
#include <stdint.h>

#include "megakernel/device_failure.cuh"
#include "megakernel/device_records.h"
#include "megakernel/tile_attention.cuh"
#include "megakernel/tile_build.h"
#include "megakernel/tile_embed.cuh"
#include "megakernel/tile_gdn.cuh"
#include "megakernel/tile_mlp.cuh"
#include "megakernel/tile_moe.cuh"
#include "megakernel/tile_projection.cuh"
#include "megakernel/tile_sample.cuh"

namespace spindle::cuda {

// `t` and `c` are the task and the context the tile reads (the persistent kernel passes copies
// in shared memory); `extras` is nullptr in the per-op kernels. kOnly, when not 0, is the one
// opcode the kernel runs: its code holds that tile alone (a per-op kernel of a stage of one op),
// so that no other tile's registers and code weigh on it.
template <TileBuild kBuild, uint32_t kOnly = 0>
__device__ __forceinline__ void run_device_task(const SpTask& t, const TileContext& c, const DeviceGraph& g,
                                       const TaskSite& site, uint8_t* smem, const TileExtras* extras,
                                       const GangBarrier& gang = GangBarrier{}) {
  // Whether the kernel has op's tile: the build has it (tasks/opcodes.h SP_OPS) and kOnly allows it.
  constexpr auto has = [](uint32_t op) {
    return (sp_op_executors(op) & build_flag(kBuild)) != 0 && (kOnly == 0 || kOnly == op);
  };
  if (extras && extras->input && t.op != SP_OP_GEMV && t.op != SP_OP_GATE_UP && threadIdx.x == 0)
    extras->input->valid = 0;  // the tile may overwrite the cached input
  switch (t.op) {
    case SP_OP_EMBED:
      if constexpr (has(SP_OP_EMBED)) run_embed(t, c, site);
      return;
    case SP_OP_ROUTER:
      if constexpr (!has(SP_OP_ROUTER)) return;
      [[fallthrough]];
    case SP_OP_GEMV:  // and ROUTER: one inlined copy of the tile (a second made ptxas spill)
      if constexpr (has(SP_OP_GEMV) || has(SP_OP_ROUTER))
        run_gemv<kBuild == TileBuild::kTwoHop || kBuild == TileBuild::kPerOp, has(SP_OP_ROUTER)>(t, c, smem, extras);
      return;
    case SP_OP_GATE_UP:
      if constexpr (has(SP_OP_GATE_UP)) run_gate_up(t, c, smem, extras);
      return;
    case SP_OP_ATTENTION:
    case SP_OP_GATED_ATTENTION:  // one inlined copy for both where the build has both
      if constexpr (has(SP_OP_GATED_ATTENTION))
        run_attention<true>(t, c, g.attn_positions, g.attn_kv_positions, smem, site, extras);
      else if constexpr (has(SP_OP_ATTENTION))
        run_attention<false>(t, c, g.attn_positions, g.attn_kv_positions, smem, site, extras);
      return;
    case SP_OP_SAMPLE:
      if constexpr (has(SP_OP_SAMPLE)) run_sample(t, c, smem, site);
      return;
    case SP_OP_MLP:
      if constexpr (has(SP_OP_MLP)) run_mlp<kBuild == TileBuild::kPerOp>(t, c, smem, site, extras, gang);
      return;
    case SP_OP_GEMV_PIECE:
      if constexpr (has(SP_OP_GEMV_PIECE)) run_gemv_piece(t, c, smem);
      return;
    case SP_OP_EXPERT_GATE_UP:
      if constexpr (has(SP_OP_EXPERT_GATE_UP)) run_expert_gate_up(t, c, smem);
      return;
    case SP_OP_EXPERT_DOWN:
    case SP_OP_EXPERT_DOWN_SHARED:  // one inlined copy for both where the build has both
      if constexpr (has(SP_OP_EXPERT_DOWN_SHARED)) run_expert_down<true>(t, c, smem, site);
      else if constexpr (has(SP_OP_EXPERT_DOWN)) run_expert_down<false>(t, c, smem, site);
      return;
    case SP_OP_GDN:
      if constexpr (has(SP_OP_GDN)) run_gdn(t, c, smem, extras, gang, site);
      return;
    case SP_OP_PIECE_DOTS:
      if constexpr (has(SP_OP_PIECE_DOTS)) run_piece_dots(t, c, smem);
      return;
    case SP_OP_PIECE_SUM:
      if constexpr (has(SP_OP_PIECE_SUM)) run_piece_sum(t, c);
      return;
    case SP_OP_EXPERT_DOWN_PIECE:
      if constexpr (has(SP_OP_EXPERT_DOWN_PIECE)) run_expert_down_piece(t, c, smem);
      return;
    case SP_OP_EXPERT_DOWN_SUM:
      if constexpr (has(SP_OP_EXPERT_DOWN_SUM)) run_expert_down_sum(t, c, smem);
      return;
  }
}

// Thread 0, after a task: its trace record, when the run traces (`trace` is the run control's
// and `step_base` its first step).
__device__ inline void record_trace(DeviceTrace* trace, uint32_t step_base, uint32_t n_tasks, const TaskSite& site,
                                    uint64_t start_ns, uint64_t end_ns, uint64_t wait_ns) {
  if (!trace) return;
  trace[size_t(site.step - step_base) * n_tasks + site.task] =
      DeviceTrace{site.step, site.task, sm_id(), 0, start_ns, end_ns, wait_ns};
}

}  // namespace spindle::cuda
