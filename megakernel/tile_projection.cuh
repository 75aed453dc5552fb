// GEMV and GATE_UP tiles (docs/numerics.md): the input is normalised once per task into
// shared memory, then each warp takes rows r0 + warp, r0 + warp + warps, … and computes each
// row's canonical dot against the bf16 weights streamed with 16-byte loads.
#pragma once
#include <stdint.h>

#include "megakernel/device_dot.cuh"
#include "megakernel/tile_layout.h"
#include "ops/argmax.h"
#include "ops/context.h"
#include "ops/gemv.h"
#include "ops/norm.h"

namespace spindle::cuda {

// The vector a projection multiplies, as bf16 in shared memory: RMSNorm(x) with norm_w, else
// x. Every element of a normalised input is bf16-rounded, so bf16 storage is exact.
__device__ inline const bf16* projection_input(const bf16* x, uint32_t K, const bf16* norm_w,
                                               const SpGraphParams& p, uint8_t* smem) {
  float* inv = reinterpret_cast<float*>(smem);
  bf16* n = reinterpret_cast<bf16*>(smem + kTileScratchBytes);
  block_copy_bf16<Src::Data>(x, n, K);
  __syncthreads();
  if (!norm_w) return n;
  if (warp_id() == 0) {
    const float ss = warp_dot<Src::Shared, Src::Shared>(n, n, K);
    if (lane_id() == 0) *inv = rms_inverse<float>(ss, K, p.rms_eps);
  }
  __syncthreads();
  for (uint32_t k = threadIdx.x; k < K; k += blockDim.x)
    n[k] = rms_norm_element<float>(widen<float>(n[k]), *inv, widen<float>(load_bf16<Src::Weight>(norm_w + k)),
                                   p.norm_kind);
  __syncthreads();
  return n;
}

// The better of two argmax partials: `argmax_offer` applied in index order. Selection by
// (not NaN, value, earlier index) is associative, so any reduction tree gives the sequential
// scan's answer. {NaN, ~0u} is the identity.
__device__ inline ArgmaxPartial argmax_merge(ArgmaxPartial a, ArgmaxPartial b) {
  ArgmaxPartial first = a.index <= b.index ? a : b;
  const ArgmaxPartial later = a.index <= b.index ? b : a;
  argmax_offer(first, later.value, later.index);
  return first;
}

// Merges one partial per warp (lane 0's `mine`) into the block's, returned to thread 0.
// Called by every thread of the block.
__device__ inline ArgmaxPartial block_argmax(ArgmaxPartial mine, uint8_t* smem) {
  ArgmaxPartial* per_warp = reinterpret_cast<ArgmaxPartial*>(smem + 16);
  if (lane_id() == 0) per_warp[warp_id()] = mine;
  __syncthreads();
  ArgmaxPartial best = per_warp[0];
  if (threadIdx.x == 0)
    for (uint32_t w = 1; w < warps_per_block(); ++w) best = argmax_merge(best, per_warp[w]);
  return best;
}

// Calls f.template operator()<R>(r) on groups of R of the rows first, first + stride, … below
// end (R = 4, then 2, then 1), in increasing order: a warp's rows, several in flight at once.
template <class F>
__device__ __forceinline__ void for_row_groups(uint32_t first, uint32_t end, uint32_t stride, F&& f) {
  uint32_t r = first;
  for (; r + 3 * stride < end; r += 4 * stride) f.template operator()<4>(r);
  if (r + stride < end) {
    f.template operator()<2>(r);
    r += 2 * stride;
  }
  if (r < end) f.template operator()<1>(r);
}

// Loads in flight per lane across a group's weight rows.
constexpr int kLoadsInFlight = 8;

__device__ inline void run_gemv(const SpTask& t, const TileContext& c, uint8_t* smem) {
  const SpView& W = c.views[t.operand[0]];
  const uint32_t K = W.cols;
  const bf16* norm_w = t.operand[2] == SP_NO_VIEW ? nullptr : view_data<const bf16>(c, t.operand[2]);
  const bf16* n = projection_input(view_data<const bf16>(c, t.operand[1]), K, norm_w, *c.params, smem);
  const bf16* w = view_data<const bf16>(c, t.operand[0]);
  const bool f32_out = c.views[t.operand[3]].dtype == SP_F32;
  void* out = view_data<void>(c, t.operand[3]);
  const bf16* residual = t.operand[4] == SP_NO_VIEW ? nullptr : view_data<const bf16>(c, t.operand[4]);
  const uint32_t flags = t.operand[5];
  const uint32_t first_row = t.tile_begin + warp_id(), stride = warps_per_block();

  ArgmaxPartial best = first_row < t.tile_end ? argmax_none(first_row) : ArgmaxPartial{argmax_none(0).value, ~0u};
  for_row_groups(first_row, t.tile_end, stride, [&]<int R>(uint32_t r0) {
    const bf16* rows[R];
    for (int i = 0; i < R; ++i) rows[i] = w + size_t(r0 + i * stride) * W.row_stride;
    float dots[R];
    warp_dot_rows<Src::Weight, Src::Shared, R, kLoadsInFlight / R>(rows, n, K, dots);
    if (lane_id() != 0) return;  // lane 0 alone finishes the rows: the residual may alias out
    for (int i = 0; i < R; ++i) {
      const uint32_t r = r0 + i * stride;
      bf16 y = to_bf16(dots[i]);
      if (residual) y = to_bf16(widen<float>(load_bf16<Src::Data>(residual + r)) + widen<float>(y));
      if (f32_out) store_bf16(static_cast<float*>(out)[r], y);
      else store_bf16(static_cast<bf16*>(out)[r], y);
      argmax_offer(best, bf16_to_f32(y), r);
    }
  });
  if (flags & 1u) {
    best = block_argmax(best, smem);
    if (threadIdx.x == 0) view_data<ArgmaxPartial>(c, t.operand[6])[flags >> 16] = best;
  }
}

__device__ inline void run_gate_up(const SpTask& t, const TileContext& c, uint8_t* smem) {
  const SpView& Wg = c.views[t.operand[0]];
  const uint32_t K = Wg.cols;
  const bf16* n = projection_input(view_data<const bf16>(c, t.operand[2]), K,
                                   view_data<const bf16>(c, t.operand[3]), *c.params, smem);
  const bf16* wg = view_data<const bf16>(c, t.operand[0]);
  const bf16* wu = view_data<const bf16>(c, t.operand[1]);
  bf16* act = view_data<bf16>(c, t.operand[4]);
  const uint32_t stride = warps_per_block();
  for_row_groups(t.tile_begin + warp_id(), t.tile_end, stride, [&]<int R>(uint32_t r0) {
    const bf16* rows[2 * R];  // gate and up row of each output row
    for (int i = 0; i < R; ++i) {
      rows[2 * i] = wg + size_t(r0 + i * stride) * Wg.row_stride;
      rows[2 * i + 1] = wu + size_t(r0 + i * stride) * Wg.row_stride;
    }
    float dots[2 * R];
    warp_dot_rows<Src::Weight, Src::Shared, 2 * R, (kLoadsInFlight / (2 * R) > 0 ? kLoadsInFlight / (2 * R) : 1)>(
        rows, n, K, dots);
    if (lane_id() != 0) return;
    for (int i = 0; i < R; ++i) act[r0 + i * stride] = swiglu(rounded(dots[2 * i]), rounded(dots[2 * i + 1]));
  });
}

}  // namespace spindle::cuda
