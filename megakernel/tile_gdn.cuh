// The GDN tile (tasks/opcodes.h SP_OP_GDN; ops/gdn.h, docs/numerics.md), one value head h at a
// time, or a gang member's share of h's rows: the block's threads on the conv of h's q and k
// channels and its rows' v channels; two warps on the L2 norms and a thread on the gates; a
// half-warp or a warp a row of h's state for the delta rule, each lane holding
// the canonical order's runs of 8 key elements (ops/dot.h), so that the row's two dots are the
// host's bit for bit; then the gated RMSNorm. The conv rings, the state and the projections are
// written by other blocks (another step's, or this step's projections), so they are read past
// L1 (Src::Data).
#pragma once
#include <stdint.h>

#include "megakernel/device_dot.cuh"
#include "megakernel/device_records.h"
#include "megakernel/gang_barrier.cuh"
#include "megakernel/tile_extras.cuh"
#include "megakernel/tile_layout.h"
#include "ops/context.h"
#include "ops/gdn.h"
#include "ops/norm.h"
#include "tasks/gdn_shape.h"

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

// State rows a lane group loads before it computes.
constexpr uint32_t kGdnRowsInFlight = 4;

// A lane's run of a state row: x[e] = p[e] for e < n (n <= 8), 0 past it; a whole run 16 bytes
// aligned in two vector loads (a load a float would ask the L2 for a sector per lane: 8 times
// the row's sectors), read past L1.
__device__ inline void load_run(const float* p, uint32_t n, float (&x)[kDotVec]) {
  if (n == kDotVec && aligned16(p)) {
    const float4 a = __ldcg(reinterpret_cast<const float4*>(p)), b = __ldcg(reinterpret_cast<const float4*>(p) + 1);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
    return;
  }
#pragma unroll
  for (uint32_t e = 0; e < kDotVec; ++e) x[e] = e < n ? load_data(p + e) : 0.0f;
}

// Stores p[e] = x[e] for e < n, as load_run reads them.
__device__ inline void store_run(float* p, uint32_t n, const float (&x)[kDotVec]) {
  if (n == kDotVec && aligned16(p)) {
    reinterpret_cast<float4*>(p)[0] = make_float4(x[0], x[1], x[2], x[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(x[4], x[5], x[6], x[7]);
    return;
  }
#pragma unroll
  for (uint32_t e = 0; e < kDotVec; ++e)
    if (e < n) p[e] = x[e];
}

// Value head h's state rows j0 .. j0 + n - 1 (all dv of them but in a gang member). The loads
// that wait on nothing the tile computes (the gates' inputs, the first state rows of each lane
// group, the z and norm weight of each thread's row) are issued first, so that their latency
// overlaps the conv's. When ganged(gang) (a member running at once with its gang, tasks/opcodes.h
// SP_OP_GDN) the head's other rows are the other members': the outputs go through proj's
// exchange, read back whole for the RMS after a gang barrier; a barrier not met (the run
// aborted) ends the tile.
__device__ inline void gdn_head_tile(const SpTask& t, const TileContext& c, const GdnShape& sh, uint32_t h, uint32_t j0,
                                     uint32_t n, uint32_t position, uint8_t* smem, const GangBarrier& gang,
                                     const TaskSite& site) {
  static_assert(kGdnMaxHeadDim <= kBlockThreads, "a thread a row of the gated norm");
  const uint32_t Hk = sh.Hk, Hv = sh.Hv, dk = sh.dk, dv = sh.dv, Kc = sh.Kc, C = sh.C, g = h / (Hv / Hk);
  const bool writes_qk = h % (Hv / Hk) == 0 && j0 == 0;
  bf16* proj = view_data<bf16>(c, t.operand[0]);
  const bf16* conv_w = view_data<const bf16>(c, t.operand[1]);
  const size_t conv_w_stride = c.views[t.operand[1]].row_stride;
  bf16* ring = view_data<bf16>(c, t.operand[5]);
  const size_t ring_stride = c.views[t.operand[5]].row_stride;
  float* q = reinterpret_cast<float*>(smem + gdn_q_offset());
  float* k = reinterpret_cast<float*>(smem + gdn_k_offset());
  float* v = reinterpret_cast<float*>(smem + gdn_v_offset());
  bf16* o = reinterpret_cast<bf16*>(smem + gdn_o_offset());
  float* scalars = reinterpret_cast<float*>(smem);  // beta, decay, inv_q, inv_k

  // The delta rule's lane groups: a row's canonical lane l (ops/dot.h) holds its elements
  // 8l .. 8l + 7, kGdnRowsInFlight rows a group at once (their loads in flight together). With
  // dk <= 128 only lanes 0..15 hold elements, so the butterfly's first step adds +0 (a lane's
  // sum, begun at +0, is never -0) and each half-warp takes a row of its own.
  float* S = view_data<float>(c, t.operand[6]) + size_t(h) * dv * dk;
  const bool halves = dk <= kDotBlock / 2;
  const uint32_t lane = halves ? lane_id() % 16 : lane_id(), group = halves ? lane_id() / 16 : 0;
  const uint32_t groups = halves ? 2 : 1, first_off = halves ? 8 : 16;
  const uint32_t run = lane * kDotVec < dk ? min(kDotVec, dk - lane * kDotVec) : 0;  // the lane's elements
  const uint32_t first = j0 + warp_id() * groups * kGdnRowsInFlight;
  float s[kGdnRowsInFlight][kDotVec];
  auto load_rows = [&](uint32_t base) {
#pragma unroll
    for (uint32_t r = 0; r < kGdnRowsInFlight; ++r) {
      const uint32_t j = base + r * groups + group;
      load_run(S + size_t(j) * dk + lane * kDotVec, j < j0 + n ? run : 0, s[r]);
    }
  };
  if (first < j0 + n) load_rows(first);
  const bf16* ba = proj + C + size_t(Hv) * dv;
  bf16 gate_in[4] = {};  // b, a, A_log, dt_bias
  if (threadIdx.x == 64) {
    gate_in[0] = load_bf16<Src::Data>(ba + h);
    gate_in[1] = load_bf16<Src::Data>(ba + Hv + h);
    gate_in[2] = view_data<const bf16>(c, t.operand[2])[h];
    gate_in[3] = view_data<const bf16>(c, t.operand[3])[h];
  }
  const uint32_t row = j0 + threadIdx.x;  // the thread's row of the gated norm, if below j0 + n
  const bool has_row = threadIdx.x < n;
  const float z_row = has_row ? widen<float>(load_bf16<Src::Data>(proj + C + size_t(h) * dv + row)) : 0.0f;
  const float w_row = has_row ? widen<float>(view_data<const bf16>(c, t.operand[4])[row]) : 0.0f;

  // The conv of the head's q and k channels and of its rows' v channels (v[j] for row j).
  for (uint32_t i = threadIdx.x; i < 2 * dk + n; i += blockDim.x) {
    const uint32_t ch = i < dk ? g * dk + i : i < 2 * dk ? (Hk + g) * dk + i - dk : 2 * Hk * dk + h * dv + j0 + i - 2 * dk;
    bf16* r = ring + ch * ring_stride;
    const bf16 x = load_bf16<Src::Data>(proj + ch);
    const bf16 y = conv_ring_output<float>(Kc, conv_w + ch * conv_w_stride, x, position,
                                           [r](uint32_t slot) { return load_bf16<Src::Data>(r + slot); });
    if (i >= 2 * dk || writes_qk) r[position % Kc] = x;
    if (i < dk) q[i] = widen<float>(y);
    else if (i < 2 * dk) k[i - dk] = widen<float>(y);
    else v[j0 + i - 2 * dk] = widen<float>(y);
  }
  __syncthreads();
  if (warp_id() < 2) {
    float* x = warp_id() == 0 ? q : k;
    const float inv = pm_rsqrt(warp_dot_runs(x, x, dk) + 1e-6f);
    if (lane_id() == 0) scalars[2 + warp_id()] = inv;
  } else if (threadIdx.x == 64) {
    const GdnGates<float> gates = gdn_gates<float>(gate_in[0], gate_in[1], gate_in[2], gate_in[3]);
    scalars[0] = gates.beta;
    scalars[1] = gates.decay;
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < dk; i += blockDim.x) {
    q[i] = gdn_query_element<float>(q[i], scalars[2], dk);
    k[i] = k[i] * scalars[3];
  }
  __syncthreads();

  const float beta = scalars[0], decay = scalars[1];
  auto reduce = [first_off](float x) {
    for (uint32_t off = first_off; off > 0; off /= 2) x = x + __shfl_xor_sync(0xffffffffu, x, off);
    return x;
  };
  for (uint32_t base = first; base < j0 + n; base += warps_per_block() * groups * kGdnRowsInFlight) {
    if (base != first) load_rows(base);
    float m[kGdnRowsInFlight];
#pragma unroll
    for (uint32_t r = 0; r < kGdnRowsInFlight; ++r) {
      m[r] = 0.0f;
#pragma unroll
      for (uint32_t e = 0; e < kDotVec; ++e) {
        s[r][e] = s[r][e] * decay;
        if (lane * kDotVec + e < dk) m[r] = m[r] + s[r][e] * k[lane * kDotVec + e];
      }
      m[r] = reduce(m[r]);
    }
#pragma unroll
    for (uint32_t r = 0; r < kGdnRowsInFlight; ++r) {
      const uint32_t j = base + r * groups + group;
      const float delta = (j < j0 + n ? v[j] - m[r] : 0.0f) * beta;
      float out = 0.0f;
#pragma unroll
      for (uint32_t e = 0; e < kDotVec; ++e) {
        const uint32_t i = lane * kDotVec + e;
        if (i >= dk) continue;
        s[r][e] = s[r][e] + k[i] * delta;
        out = out + s[r][e] * q[i];
      }
      store_run(S + size_t(j) * dk + lane * kDotVec, j < j0 + n ? run : 0, s[r]);
      out = reduce(out);
      if (j < j0 + n && lane == 0) o[j] = to_bf16(out);
    }
  }

  if (ganged(gang)) {  // phase 0's outputs to the exchange; phase 1 reads the head's back
    bf16* exchange = proj + C + size_t(Hv) * dv + 2 * Hv + size_t(h) * dv;
    __syncthreads();
    if (has_row) exchange[row] = o[row];
    if (!gang_barrier(gang, 0, site)) return;
    for (uint32_t j = threadIdx.x; j < dv; j += blockDim.x) o[j] = load_bf16<Src::Data>(exchange + j);
  }
  __syncthreads();

  // The gated RMSNorm (ops/gdn.h gated_rms_norm): 1/rms by warp 0, then an element a thread.
  if (warp_id() == 0) {
    const float inv = rms_inverse<float>(warp_dot<Src::Shared, Src::Shared, 1>(o, o, dv), dv, c.params->rms_eps);
    if (lane_id() == 0) scalars[2] = inv;
  }
  __syncthreads();
  if (has_row) {
    const bf16 y = rms_norm_element<float>(widen<float>(o[row]), scalars[2], w_row, SP_NORM_STANDARD);
    view_data<bf16>(c, t.operand[7])[size_t(h) * dv + row] = to_bf16(widen<float>(y) * pm_silu(z_row));
  }
  __syncthreads();  // the next head reuses shared memory
}

// The persistent kernel's extras carry the step's position; the per-op kernels load it. When
// ganged(gang) the block runs its member's rows; else a gang runs whole: rank 0 the head, the
// other ranks nothing.
__device__ inline void run_gdn(const SpTask& t, const TileContext& c, uint8_t* smem, const TileExtras* extras,
                               const GangBarrier& gang, const TaskSite& site) {
  const uint32_t position =
      extras && extras->position != kPositionFromState ? extras->position : load_data(&c.state->position);
  const GdnShape s = gdn_shape(t, c.views);
  if (!ganged(gang) && s.width > 1 && t.gang_rank != 0) return;
  // One call site: one copy of the tile's code.
  const uint32_t j0 = ganged(gang) ? s.row : 0u, n = ganged(gang) ? s.rows : s.dv;
  for (uint32_t h = s.head; h < s.head + s.heads; ++h) gdn_head_tile(t, c, s, h, j0, n, position, smem, gang, site);
}

}  // namespace spindle::cuda
