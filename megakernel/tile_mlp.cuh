// The MLP gang task's tile (ops/mlp.h, docs/numerics.md "MLP"): phase 0 computes a member's
// activations from the normalised hidden state (shared memory) and down's dots over their
// columns; phase 1 sums the gang's pieces over the member's share of the rows, and the last
// gang to do so for that share adds the gangs' sums to hidden. Each dot is a warp's canonical
// dot, so the bits are the CPU reference's. Step 2 of docs/two-hop-layer.md: correct, not yet
// fast (down's P columns a row are read row by row from global memory).
#pragma once
#include <stdint.h>

#include "megakernel/gang_barrier.cuh"
#include "megakernel/tile_projection.cuh"
#include "ops/mlp.h"

namespace spindle::cuda {

// Phase 0 of the member holding piece `index`; n is the normalised hidden state.
__device__ inline void mlp_piece(const SpTask& t, const TileContext& c, const MlpShape& s, uint32_t index,
                                 const bf16* n, uint8_t* smem) {
  const SpView &Wg = c.views[t.operand[0]], &Wd = c.views[t.operand[2]];
  const uint32_t c0 = index * s.piece, stride = warps_per_block();
  const bf16* wg = view_data<const bf16>(c, t.operand[0]) + size_t(c0) * Wg.row_stride;
  const bf16* wu = view_data<const bf16>(c, t.operand[1]) + size_t(c0) * Wg.row_stride;
  bf16* act = reinterpret_cast<bf16*>(smem + mlp_act_offset(s.H));
  for_row_groups<kGateUpGroupRows>(warp_id(), s.piece, stride, [&]<int R>(uint32_t j0) {
    const bf16* rows[2 * R];
    for (int i = 0; i < R; ++i) {
      rows[2 * i] = wg + size_t(j0 + i * stride) * Wg.row_stride;
      rows[2 * i + 1] = wu + size_t(j0 + i * stride) * Wg.row_stride;
    }
    float dots[2 * R];
    warp_dot_rows<Src::Weight, Src::Shared, 2 * R, chunks_in_flight(2 * R)>(rows, n, s.H, dots);
    if (lane_id() == 0)
      for (int i = 0; i < R; ++i) act[j0 + i * stride] = swiglu(rounded(dots[2 * i]), rounded(dots[2 * i + 1]));
  });
  __syncthreads();
  const bf16* wd = view_data<const bf16>(c, t.operand[2]) + c0;
  float* out = view_data<float>(c, t.operand[5]) + size_t(index) * c.views[t.operand[5]].row_stride;
  for_row_groups<kGemvGroupRows>(warp_id(), s.H, stride, [&]<int R>(uint32_t i0) {
    const bf16* rows[R];
    for (int i = 0; i < R; ++i) rows[i] = wd + size_t(i0 + i * stride) * Wd.row_stride;
    float dots[R];
    warp_dot_rows<Src::Weight, Src::Shared, R, 1>(rows, act, s.piece, dots);
    if (lane_id() == 0)
      for (int i = 0; i < R; ++i) out[i0 + i * stride] = dots[i];
  });
}

// Phase 1 of rank `rank` of gang `gang`.
__device__ inline void mlp_gang_sum(const SpTask& t, const TileContext& c, const MlpShape& s, uint32_t gang,
                                    uint32_t rank) {
  const uint32_t i0 = sp_gang_share(s.H, s.width, rank), i1 = sp_gang_share(s.H, s.width, rank + 1);
  const size_t ps = c.views[t.operand[5]].row_stride;
  const float* pieces = view_data<const float>(c, t.operand[5]) + size_t(gang) * s.width * ps;
  float* sums = view_data<float>(c, t.operand[5]) + size_t(s.pieces) * ps;
  for (uint32_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    float sum = load_data(pieces + i);
    for (uint32_t m = 1; m < s.width; ++m) sum = sum + load_data(pieces + m * ps + i);
    sums[gang * ps + i] = sum;
  }
  // Every thread's sums, then thread 0's device-scope acquire-release add (as attention's merge).
  __shared__ uint32_t s_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    DeviceAtomic count(view_data<uint32_t>(c, t.operand[6])[rank]);
    s_last = count.fetch_add(1u, kAcqRel) + 1u == s.gangs;
    if (s_last) count.store(0u, kRelaxed);
  }
  __syncthreads();
  if (!s_last) return;
  bf16* hidden = view_data<bf16>(c, t.operand[3]);
  for (uint32_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    float y = load_data(sums + i);
    for (uint32_t k = 1; k < s.gangs; ++k) y = y + load_data(sums + k * ps + i);
    hidden[i] = to_bf16(widen<float>(load_bf16<Src::Data>(hidden + i)) + widen<float>(to_bf16(y)));
  }
}

// A member's task: with `gang` (the persistent kernel running the members at once) its own
// phases around the barrier; without, rank 0 runs the whole gang and the other ranks nothing.
__device__ inline void run_mlp(const SpTask& t, const TileContext& c, uint8_t* smem, const TaskSite& site,
                               const GangBarrier* gang) {
  const MlpShape s = mlp_shape(t, c.views[t.operand[2]]);
  const uint32_t rank = s.width > 1 ? t.gang_rank : 0u;
  if (!gang && rank != 0) return;
  const bf16* n = projection_input(view_data<const bf16>(c, t.operand[3]), s.H, view_data<const bf16>(c, t.operand[4]),
                                   *c.params, smem, nullptr);
  if (gang) {
    mlp_piece(t, c, s, s.index, n, smem);
    if (!gang_barrier(*gang, 0, site)) return;
    return mlp_gang_sum(t, c, s, s.gang, rank);
  }
  for (uint32_t r = 0; r < s.width; ++r) {
    mlp_piece(t, c, s, s.index + r, n, smem);
    __syncthreads();  // the next piece's activations reuse shared memory
  }
  for (uint32_t r = 0; r < s.width; ++r) {
    mlp_gang_sum(t, c, s, s.gang, r);
    __syncthreads();
  }
}

}  // namespace spindle::cuda
