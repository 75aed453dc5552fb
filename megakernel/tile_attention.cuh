// ATTN_CHUNK and ATTN_MERGE tiles (docs/numerics.md). Every sum the contract makes sequential
// stays sequential per output value: a thread owns one (q head, dim) accumulator and adds the
// positions in increasing order; the parallelism is across heads, dims and score dots.
#pragma once
#include <math.h>
#include <stdint.h>

#include "megakernel/device_dot.cuh"
#include "megakernel/device_failure.cuh"
#include "megakernel/tile_layout.h"
#include "ops/attention.h"
#include "ops/context.h"
#include "ops/pmath.h"

namespace spindle::cuda {

// The first maximum in position order (NaN ignored, -inf when there is none): what
// `if (s > m) m = s` gives scanning positions in order. Keyed by position so any reduction
// tree agrees; only the sign of a zero could tell two equal maxima apart.
struct FirstMax {
  float value;
  uint32_t position;
};
__device__ inline FirstMax first_max(FirstMax a, FirstMax b) {
  return b.value > a.value || (b.value == a.value && b.position < a.position) ? b : a;
}

struct AttnChunkShape {
  uint32_t group, D, chunks, context, positions_per_tile;
  size_t cache_stride, partial_stride;
};

// Positions whose score dots one warp runs at once (their K rows' loads in flight together).
constexpr int kScoreRows = 8;

// Scores s_t = dot(q̂_j, K̂_t) * scale of positions [tb, te) for every q head j of the group,
// into scores[j * positions_per_tile + t - tb].
__device__ inline void attn_scores(const AttnChunkShape& a, const bf16* q, const bf16* K, uint32_t tb,
                                   uint32_t te, float scale, float* scores) {
  const uint32_t groups = (te - tb + kScoreRows - 1) / kScoreRows;
  for (uint32_t i = warp_id(); i < a.group * groups; i += warps_per_block()) {
    const uint32_t j = i / groups, t0 = tb + i % groups * kScoreRows;
    const bf16* rows[kScoreRows];
    for (int r = 0; r < kScoreRows; ++r) rows[r] = K + min(t0 + r, te - 1) * a.cache_stride;  // past te: a repeat
    float s[kScoreRows];
    warp_dot_rows<Src::Data, Src::Shared, kScoreRows, 1>(rows, q + j * a.D, a.D, s);
    if (lane_id() == 0)
      for (int r = 0; r < kScoreRows && t0 + r < te; ++r) scores[j * a.positions_per_tile + t0 + r - tb] = s[r] * scale;
  }
  __syncthreads();
}

// m[j] = the larger of m[j] (earlier positions, so it wins ties) and this tile's first max.
__device__ inline void attn_tile_max(const AttnChunkShape& a, uint32_t tb, uint32_t len, const float* scores,
                                     float* m) {
  for (uint32_t j = warp_id(); j < a.group; j += warps_per_block()) {
    FirstMax best{-INFINITY, ~0u};
    for (uint32_t i = lane_id(); i < len; i += 32) {
      const float s = scores[j * a.positions_per_tile + i];
      if (s > best.value) best = {s, tb + i};
    }
    for (int off = 16; off > 0; off /= 2)
      best = first_max(best, {__shfl_xor_sync(0xffffffffu, best.value, off),
                              __shfl_xor_sync(0xffffffffu, best.position, off)});
    if (lane_id() == 0 && best.value > m[j]) m[j] = best.value;
  }
  __syncthreads();
}

// One (kv head, chunk) tile: the online-softmax partial {m, l, acc[D]} of each q head.
__device__ inline void attn_chunk_tile(const AttnChunkShape& a, const bf16* q_all, const bf16* k_cache,
                                       const bf16* v_cache, float* partials, uint32_t kv_head, uint32_t chunk,
                                       uint32_t position, uint8_t* smem) {
  const uint32_t G = a.group, D = a.D, T = a.positions_per_tile;
  const PositionRange r = chunk_positions(position + 1, a.chunks, chunk);
  auto partial_row = [&](uint32_t j) { return partials + (size_t(kv_head * G + j) * a.chunks + chunk) * a.partial_stride; };
  if (r.begin == r.end) {
    for (uint32_t i = threadIdx.x; i < G * (D + 2); i += blockDim.x)
      partial_row(i / (D + 2))[i % (D + 2)] = i % (D + 2) == 0 ? -INFINITY : 0.0f;
    return;
  }
  float* m = reinterpret_cast<float*>(smem);  // [G], then l: [G]
  bf16* q = reinterpret_cast<bf16*>(smem + attn_q_offset());
  float* scores = reinterpret_cast<float*>(smem + attn_scores_offset(G, D));
  const bf16* K = k_cache + size_t(kv_head) * a.context * a.cache_stride;
  const bf16* V = v_cache + size_t(kv_head) * a.context * a.cache_stride;
  const float scale = pm_rsqrt(float(D));

  block_copy_bf16<Src::Data>(q_all + size_t(kv_head) * G * D, q, G * D);
  if (threadIdx.x < G) m[threadIdx.x] = -INFINITY;
  __syncthreads();
  const uint32_t tiles = (r.end - r.begin + T - 1) / T;
  for (uint32_t tb = r.begin; tb < r.end; tb += T) {
    const uint32_t te = min(tb + T, r.end);
    attn_scores(a, q, K, tb, te, scale, scores);
    attn_tile_max(a, tb, te - tb, scores, m);
  }

  float acc[kAttnPairsPerThread] = {};
  float l = 0.0f;
  for (uint32_t tb = r.begin; tb < r.end; tb += T) {
    const uint32_t te = min(tb + T, r.end), len = te - tb;
    if (tiles > 1) attn_scores(a, q, K, tb, te, scale, scores);  // one tile: still in place
    for (uint32_t i = threadIdx.x; i < G * len; i += blockDim.x) {
      float& s = scores[(i / len) * T + i % len];
      s = pm_exp(s - m[i / len]);
    }
    __syncthreads();
    if (threadIdx.x < G)
      for (uint32_t i = 0; i < len; ++i) l = l + scores[threadIdx.x * T + i];
#pragma unroll
    for (uint32_t k = 0; k < kAttnPairsPerThread; ++k) {
      const uint32_t pair = threadIdx.x + k * blockDim.x;
      if (pair >= G * D) break;
      const float* p = scores + (pair / D) * T;
      const bf16* v = V + size_t(tb) * a.cache_stride + pair % D;
#pragma unroll 8
      for (uint32_t i = 0; i < len; ++i)
        acc[k] = acc[k] + p[i] * bf16_to_f32(load_bf16<Src::Data>(v + i * a.cache_stride));
    }
    __syncthreads();  // the next tile overwrites the scores
  }
  if (threadIdx.x < G) {
    partial_row(threadIdx.x)[0] = m[threadIdx.x];
    partial_row(threadIdx.x)[1] = l;
  }
#pragma unroll
  for (uint32_t k = 0; k < kAttnPairsPerThread; ++k) {
    const uint32_t pair = threadIdx.x + k * blockDim.x;
    if (pair >= G * D) break;
    partial_row(pair / D)[2 + pair % D] = acc[k];
  }
}

__device__ inline void run_attn_chunk(const SpTask& t, const TileContext& c, uint32_t positions_per_tile,
                                      uint8_t* smem, const TaskSite& site) {
  const SpGraphParams& p = *c.params;
  const uint32_t position = load_data(&c.state->position);
  if (position >= p.context) return fail_task(site, kFailPositionRange, position, p.context);
  const AttnChunkShape a{p.n_heads / p.n_kv_heads, p.head_dim, p.attn_chunks, p.context, positions_per_tile,
                         c.views[t.operand[1]].row_stride, c.views[t.operand[3]].row_stride};
  for (uint32_t tile = t.tile_begin; tile < t.tile_end; ++tile) {
    attn_chunk_tile(a, view_data<const bf16>(c, t.operand[0]), view_data<const bf16>(c, t.operand[1]),
                    view_data<const bf16>(c, t.operand[2]), view_data<float>(c, t.operand[3]), tile / a.chunks,
                    tile % a.chunks, position, smem);
    __syncthreads();  // the next tile reuses shared memory
  }
}

// out[h, d] = r(o_d / L) for q heads [tile_begin, tile_end); one thread per (head, dim), each
// merging the head's chunks in chunk order.
__device__ inline void run_attn_merge(const SpTask& t, const TileContext& c) {
  const uint32_t D = c.params->head_dim, chunks = c.params->attn_chunks;
  const size_t stride = c.views[t.operand[0]].row_stride;
  const float* partials = view_data<const float>(c, t.operand[0]);
  bf16* out = view_data<bf16>(c, t.operand[1]);
  for (uint32_t i = threadIdx.x; i < (t.tile_end - t.tile_begin) * D; i += blockDim.x) {
    const uint32_t h = t.tile_begin + i / D, d = i % D;
    const float* rows = partials + size_t(h) * chunks * stride;
    float M = -INFINITY;
    for (uint32_t ch = 0; ch < chunks; ++ch) {
      const float m = load_data(rows + ch * stride);
      if (m > M) M = m;
    }
    float L = 0.0f, o = 0.0f;
    for (uint32_t ch = 0; ch < chunks; ++ch) {
      const float* row = rows + ch * stride;
      const float l = load_data(row + 1);
      if (l == 0.0f) continue;  // an empty chunk
      const float w = pm_exp(load_data(row) - M);
      L = L + l * w;
      o = o + load_data(row + 2 + d) * w;
    }
    out[size_t(h) * D + d] = to_bf16(o / L);
  }
}

}  // namespace spindle::cuda
