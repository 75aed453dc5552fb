// The GDN tile (tasks/opcodes.h SP_OP_GDN; ops/gdn.h, docs/numerics.md), one value head h at a
// time: the block's threads on the conv of h's q, k and v channels; two warps on the L2 norms
// and a thread on the gates; a warp a row of h's state for the delta rule, each lane holding
// the canonical order's runs of 8 key elements (ops/dot.h), so that the row's two dots are the
// host's bit for bit; then the gated RMSNorm. The conv rings, the state and the projections are
// written by other blocks (another step's, or this step's projections), so they are read past
// L1 (Src::Data).
#pragma once
#include <stdint.h>

#include "megakernel/device_dot.cuh"
#include "megakernel/tile_extras.cuh"
#include "megakernel/tile_layout.h"
#include "ops/context.h"
#include "ops/gdn.h"
#include "ops/norm.h"

namespace spindle::cuda {

// The canonical dot (ops/dot.h) of two float vectors of n <= kDotBlock elements in shared
// memory: lane l sums its run [8l, 8l + 8) in order, then the butterfly; every lane gets it.
__device__ inline float warp_dot_runs(const float* a, const float* b, uint32_t n) {
  float acc = 0.0f;
#pragma unroll
  for (uint32_t e = 0; e < kDotVec; ++e) {
    const uint32_t i = lane_id() * kDotVec + e;
    if (i < n) acc = acc + a[i] * b[i];
  }
  return warp_butterfly_sum(acc);
}

__device__ inline void gdn_head_tile(const SpTask& t, const TileContext& c, uint32_t h, uint32_t position,
                                     uint8_t* smem) {
  const SpView &conv = c.views[t.operand[1]], &state_view = c.views[t.operand[6]];
  const uint32_t Hv = c.views[t.operand[2]].cols, dv = c.views[t.operand[4]].cols, dk = state_view.cols;
  const uint32_t Hk = (conv.rows - Hv * dv) / (2 * dk), Kc = conv.cols, g = h / (Hv / Hk);
  const uint32_t C = conv.rows;
  const bool writes_qk = h % (Hv / Hk) == 0;
  const bf16* proj = view_data<const bf16>(c, t.operand[0]);
  const bf16* conv_w = view_data<const bf16>(c, t.operand[1]);
  bf16* ring = view_data<bf16>(c, t.operand[5]);
  const size_t ring_stride = c.views[t.operand[5]].row_stride;
  float* q = reinterpret_cast<float*>(smem + gdn_q_offset());
  float* k = reinterpret_cast<float*>(smem + gdn_k_offset());
  float* v = reinterpret_cast<float*>(smem + gdn_v_offset());
  bf16* o = reinterpret_cast<bf16*>(smem + gdn_o_offset());
  float* scalars = reinterpret_cast<float*>(smem);  // beta, decay, inv_q, inv_k

  // The conv of the head's 2 dk + dv channels: q, then k, then v.
  for (uint32_t i = threadIdx.x; i < 2 * dk + dv; i += blockDim.x) {
    const uint32_t ch = i < dk ? g * dk + i : i < 2 * dk ? (Hk + g) * dk + i - dk : 2 * Hk * dk + h * dv + i - 2 * dk;
    bf16* r = ring + ch * ring_stride;
    const bf16 x = load_bf16<Src::Data>(proj + ch);
    const bf16 y = conv_ring_output<float>(Kc, conv_w + ch * conv.row_stride, x, position,
                                           [r](uint32_t slot) { return load_bf16<Src::Data>(r + slot); });
    if (i >= 2 * dk || writes_qk) r[position % Kc] = x;
    if (i < dk) q[i] = widen<float>(y);
    else if (i < 2 * dk) k[i - dk] = widen<float>(y);
    else v[i - 2 * dk] = widen<float>(y);
  }
  __syncthreads();
  if (warp_id() < 2) {
    float* x = warp_id() == 0 ? q : k;
    const float inv = pm_rsqrt(warp_dot_runs(x, x, dk) + 1e-6f);
    if (lane_id() == 0) scalars[2 + warp_id()] = inv;
  } else if (threadIdx.x == 64) {
    const bf16* ba = proj + C + size_t(Hv) * dv;
    const GdnGates<float> gates =
        gdn_gates<float>(load_bf16<Src::Data>(ba + h), load_bf16<Src::Data>(ba + Hv + h),
                         view_data<const bf16>(c, t.operand[2])[h], view_data<const bf16>(c, t.operand[3])[h]);
    scalars[0] = gates.beta;
    scalars[1] = gates.decay;
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < dk; i += blockDim.x) {
    q[i] = gdn_query_element<float>(q[i], scalars[2], dk);
    k[i] = k[i] * scalars[3];
  }
  __syncthreads();

  // The delta rule, a warp a row j (value dim j): lane l holds the row's elements 8l .. 8l + 7.
  const float beta = scalars[0], decay = scalars[1];
  float* S = view_data<float>(c, t.operand[6]) + size_t(h) * dv * dk;
  for (uint32_t j = warp_id(); j < dv; j += warps_per_block()) {
    float* row = S + size_t(j) * dk;
    float s[kDotVec];
    float m = 0.0f;
#pragma unroll
    for (uint32_t e = 0; e < kDotVec; ++e) {
      const uint32_t i = lane_id() * kDotVec + e;
      s[e] = i < dk ? load_data(row + i) * decay : 0.0f;
      if (i < dk) m = m + s[e] * k[i];
    }
    m = warp_butterfly_sum(m);
    const float delta = (v[j] - m) * beta;
    float out = 0.0f;
#pragma unroll
    for (uint32_t e = 0; e < kDotVec; ++e) {
      const uint32_t i = lane_id() * kDotVec + e;
      if (i >= dk) continue;
      s[e] = s[e] + k[i] * delta;
      out = out + s[e] * q[i];
      row[i] = s[e];
    }
    out = warp_butterfly_sum(out);
    if (lane_id() == 0) o[j] = to_bf16(out);
  }
  __syncthreads();

  // The gated RMSNorm (ops/gdn.h gated_rms_norm): 1/rms by warp 0, then an element a thread.
  if (warp_id() == 0) {
    const float inv = rms_inverse<float>(warp_dot<Src::Shared, Src::Shared, 1>(o, o, dv), dv, c.params->rms_eps);
    if (lane_id() == 0) scalars[2] = inv;
  }
  __syncthreads();
  const bf16* norm_w = view_data<const bf16>(c, t.operand[4]);
  const bf16* z = proj + C + size_t(h) * dv;
  bf16* out = view_data<bf16>(c, t.operand[7]) + size_t(h) * dv;
  for (uint32_t j = threadIdx.x; j < dv; j += blockDim.x) {
    const bf16 n = rms_norm_element<float>(widen<float>(o[j]), scalars[2], widen<float>(norm_w[j]), SP_NORM_STANDARD);
    out[j] = to_bf16(widen<float>(n) * pm_silu(widen<float>(load_bf16<Src::Data>(z + j))));
  }
  __syncthreads();  // the next head reuses shared memory
}

// The persistent kernel's extras carry the step's position; the per-op kernels load it.
__device__ inline void run_gdn(const SpTask& t, const TileContext& c, uint8_t* smem, const TileExtras* extras) {
  const uint32_t position =
      extras && extras->position != kPositionFromState ? extras->position : load_data(&c.state->position);
  for (uint32_t h = t.tile_begin; h < t.tile_end; ++h) gdn_head_tile(t, c, h, position, smem);
}

}  // namespace spindle::cuda
