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
  uint32_t group, D, chunks, context;
  uint32_t score_positions;  // S: positions of one score block (scores row stride)
  uint32_t kv_positions;     // T: positions whose K and V rows one stage holds (2T of one)
  size_t cache_stride, partial_stride;
};

// Copies rows [0, rows) of D bf16 of a (src_a → dst_a) and, when src_b is set, of b, into
// shared memory (rows D apart), by the block: every 16-byte piece is in flight at once
// (asynchronous copies, no registers). The caller syncs the block before reading them.
__device__ inline void stage_rows(const bf16* src_a, bf16* dst_a, const bf16* src_b, bf16* dst_b, size_t stride,
                                  uint32_t rows, uint32_t D) {
  if (stride == D) {  // contiguous rows: one run each
    stage_to_shared<Src::Data>(src_a, dst_a, rows * D);
    if (src_b) stage_to_shared<Src::Data>(src_b, dst_b, rows * D);
    cp_async_wait_all();
    return;
  }
  const bool vec = D % kDotVec == 0 && stride % kDotVec == 0 && aligned16(src_a) && (!src_b || aligned16(src_b)) &&
                   aligned16(dst_a) && (!src_b || aligned16(dst_b));
  if (!vec) {
    for (uint32_t i = threadIdx.x; i < rows * D; i += blockDim.x) {
      dst_a[i] = load_bf16<Src::Data>(src_a + size_t(i / D) * stride + i % D);
      if (src_b) dst_b[i] = load_bf16<Src::Data>(src_b + size_t(i / D) * stride + i % D);
    }
    return;
  }
  const uint32_t per_row = D / kDotVec, n = rows * per_row;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const size_t from = size_t(i / per_row) * stride + i % per_row * kDotVec;
    cp_async16(dst_a + size_t(i) * kDotVec, src_a + from);
    if (src_b) cp_async16(dst_b + size_t(i) * kDotVec, src_b + from);
  }
  cp_async_wait_all();
}

// Positions whose score dots one warp runs at once.
constexpr int kScoreRows = 4;

// Scores s_t = dot(q̂_j, K̂_t) * scale of positions [kb, ke) for every q head j of the group,
// from their K rows staged at Ks (row t - kb), into srow[j * S + t - kb].
__device__ inline void attn_scores(const AttnChunkShape& a, const bf16* q, const bf16* Ks, uint32_t kb, uint32_t ke,
                                   float scale, float* srow) {
  const uint32_t groups = (ke - kb + kScoreRows - 1) / kScoreRows;
  for (uint32_t i = warp_id(); i < a.group * groups; i += warps_per_block()) {
    const uint32_t j = i / groups, t0 = i % groups * kScoreRows;
    const bf16* rows[kScoreRows];
    for (int r = 0; r < kScoreRows; ++r) rows[r] = Ks + min(t0 + r, ke - kb - 1) * a.D;  // past ke: a repeat
    float s[kScoreRows];
    warp_dot_rows<Src::Shared, Src::Shared, kScoreRows, 1>(rows, q + j * a.D, a.D, s);
    if (lane_id() == 0)
      for (int r = 0; r < kScoreRows && kb + t0 + r < ke; ++r) srow[j * a.score_positions + t0 + r] = s[r] * scale;
  }
  __syncthreads();
}

// m[j] = the larger of m[j] (earlier positions, so it wins ties) and the first max of the
// score block of positions [sb, sb + len).
__device__ inline void attn_tile_max(const AttnChunkShape& a, uint32_t sb, uint32_t len, const float* scores,
                                     float* m) {
  for (uint32_t j = warp_id(); j < a.group; j += warps_per_block()) {
    FirstMax best{-INFINITY, ~0u};
    for (uint32_t i = lane_id(); i < len; i += 32) {
      const float s = scores[j * a.score_positions + i];
      if (s > best.value) best = {s, sb + i};
    }
    for (int off = 16; off > 0; off /= 2)
      best = first_max(best, {__shfl_xor_sync(0xffffffffu, best.value, off),
                              __shfl_xor_sync(0xffffffffu, best.position, off)});
    if (lane_id() == 0 && best.value > m[j]) m[j] = best.value;
  }
  __syncthreads();
}

// One (kv head, chunk) tile: the online-softmax partial {m, l, acc[D]} of each q head. K and
// V rows are staged in shared memory (all loads of a stage in flight at once) and every sum
// runs from there in position order.
__device__ inline void attn_chunk_tile(const AttnChunkShape& a, const bf16* q_all, const bf16* k_cache,
                                       const bf16* v_cache, float* partials, uint32_t kv_head, uint32_t chunk,
                                       uint32_t position, uint8_t* smem) {
  const uint32_t G = a.group, D = a.D, S = a.score_positions, T = a.kv_positions;
  const PositionRange r = chunk_positions(position + 1, a.chunks, chunk);
  auto partial_row = [&](uint32_t j) { return partials + (size_t(kv_head * G + j) * a.chunks + chunk) * a.partial_stride; };
  if (r.begin == r.end) {
    for (uint32_t i = threadIdx.x; i < G * (D + 2); i += blockDim.x)
      partial_row(i / (D + 2))[i % (D + 2)] = i % (D + 2) == 0 ? -INFINITY : 0.0f;
    return;
  }
  float* m = reinterpret_cast<float*>(smem);  // [G]
  bf16* q = reinterpret_cast<bf16*>(smem + attn_q_offset());
  float* scores = reinterpret_cast<float*>(smem + attn_scores_offset(G, D));
  bf16* kv = reinterpret_cast<bf16*>(smem + attn_kv_offset(G, D, S));
  bf16* kv_second = kv + size_t(T) * D;  // V, when K and V are staged together
  const bf16* K = k_cache + size_t(kv_head) * a.context * a.cache_stride;
  const bf16* V = v_cache + size_t(kv_head) * a.context * a.cache_stride;
  const float scale = pm_rsqrt(float(D));
  const uint32_t len = r.end - r.begin;
  const bool both = len <= T && len <= S;  // one score block, K and V staged once
  const bool rescore = len > S;

  // Scores of the block [sb, se), K staged `both ? T : 2T` positions at a time.
  auto score_block = [&](uint32_t sb, uint32_t se) {
    const uint32_t step = both ? T : 2 * T;
    for (uint32_t kb = sb; kb < se; kb += step) {
      const uint32_t ke = min(kb + step, se);
      stage_rows(K + size_t(kb) * a.cache_stride, kv, both ? V + size_t(kb) * a.cache_stride : nullptr, kv_second,
                 a.cache_stride, ke - kb, D);
      __syncthreads();
      attn_scores(a, q, kv, kb, ke, scale, scores + (kb - sb));
    }
  };

  block_copy_bf16<Src::Data>(q_all + size_t(kv_head) * G * D, q, G * D);
  if (threadIdx.x < G) m[threadIdx.x] = -INFINITY;
  __syncthreads();
  for (uint32_t sb = r.begin; sb < r.end; sb += S) {
    const uint32_t se = min(sb + S, r.end);
    score_block(sb, se);
    attn_tile_max(a, sb, se - sb, scores, m);
  }

  float acc[kAttnPairsPerThread] = {};
  float l = 0.0f;
  for (uint32_t sb = r.begin; sb < r.end; sb += S) {
    const uint32_t se = min(sb + S, r.end), slen = se - sb;
    if (rescore) score_block(sb, se);  // one block: its scores are still in place
    for (uint32_t i = threadIdx.x; i < G * slen; i += blockDim.x) {
      float& s = scores[(i / slen) * S + i % slen];
      s = pm_exp(s - m[i / slen]);
    }
    __syncthreads();
    if (threadIdx.x < G)
      for (uint32_t i = 0; i < slen; ++i) l = l + scores[threadIdx.x * S + i];
    for (uint32_t vb = sb; vb < se; vb += 2 * T) {
      const uint32_t ve = min(vb + 2 * T, se);
      const bf16* Vs = kv_second;
      if (!both) {
        stage_rows(V + size_t(vb) * a.cache_stride, kv, nullptr, nullptr, a.cache_stride, ve - vb, D);
        __syncthreads();
        Vs = kv;
      }
#pragma unroll
      for (uint32_t k = 0; k < kAttnPairsPerThread; ++k) {
        const uint32_t pair = threadIdx.x + k * blockDim.x;
        if (pair >= G * D) break;
        const float* p = scores + (pair / D) * S + (vb - sb);
        const bf16* v = Vs + pair % D;
#pragma unroll 8
        for (uint32_t i = 0; i < ve - vb; ++i) acc[k] = acc[k] + p[i] * bf16_to_f32(v[i * D]);
      }
      __syncthreads();  // the next stage overwrites the rows, the next block the scores
    }
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

__device__ inline void run_attn_chunk(const SpTask& t, const TileContext& c, uint32_t score_positions,
                                      uint32_t kv_positions, uint8_t* smem, const TaskSite& site) {
  const SpGraphParams& p = *c.params;
  const uint32_t position = load_data(&c.state->position);
  if (position >= p.context) return fail_task(site, kFailPositionRange, position, p.context);
  const AttnChunkShape a{p.n_heads / p.n_kv_heads, p.head_dim, p.attn_chunks, p.context, score_positions, kv_positions,
                         c.views[t.operand[1]].row_stride, c.views[t.operand[3]].row_stride};
  for (uint32_t tile = t.tile_begin; tile < t.tile_end; ++tile) {
    attn_chunk_tile(a, view_data<const bf16>(c, t.operand[0]), view_data<const bf16>(c, t.operand[1]),
                    view_data<const bf16>(c, t.operand[2]), view_data<float>(c, t.operand[3]), tile / a.chunks,
                    tile % a.chunks, position, smem);
    __syncthreads();  // the next tile reuses shared memory
  }
}

// out[h, d] for q heads [tile_begin, tile_end) (docs/numerics.md, ATTN_MERGE, through the
// element helpers of ops/attention.h): the heads' partial rows are staged in shared memory
// (one round trip), then each head's max, each chunk's weight, and one thread per (head, dim)
// merges the chunks in chunk order.
__device__ inline void run_attn_merge(const SpTask& t, const TileContext& c, uint8_t* smem) {
  const uint32_t D = c.params->head_dim, chunks = c.params->attn_chunks;
  const uint32_t heads = t.tile_end - t.tile_begin, rows = heads * chunks;
  const uint32_t stride = c.views[t.operand[0]].row_stride;
  const float* src = view_data<const float>(c, t.operand[0]) + size_t(t.tile_begin) * chunks * stride;
  bf16* out = view_data<bf16>(c, t.operand[1]);
  float* M = reinterpret_cast<float*>(smem);  // [heads] (the host keeps heads * 4 within the scratch)
  float* rs = reinterpret_cast<float*>(smem + kTileScratchBytes);
  float* w = reinterpret_cast<float*>(smem + kTileScratchBytes + align16(rows * stride * 4u));
  const uint32_t n = rows * stride;
  constexpr uint32_t kBatch = 8;
  for (uint32_t base = threadIdx.x; base < n; base += kBatch * blockDim.x) {
    float v[kBatch];
#pragma unroll
    for (uint32_t u = 0; u < kBatch; ++u)
      if (base + u * blockDim.x < n) v[u] = load_data(src + base + u * blockDim.x);
#pragma unroll
    for (uint32_t u = 0; u < kBatch; ++u)
      if (base + u * blockDim.x < n) rs[base + u * blockDim.x] = v[u];
  }
  __syncthreads();
  for (uint32_t h = threadIdx.x; h < heads; h += blockDim.x)
    M[h] = attn_merge_max<float>(rs + size_t(h) * chunks * stride, stride, chunks);
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < rows; i += blockDim.x)
    w[i] = attn_chunk_empty(rs + size_t(i) * stride) ? 0.0f : attn_merge_weight<float>(rs + size_t(i) * stride, M[i / chunks]);
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < heads * D; i += blockDim.x) {
    const uint32_t h = i / D, d = i % D;
    const float* hw = w + h * chunks;
    out[size_t(t.tile_begin + h) * D + d] = attn_merge_element<float>(
        rs + size_t(h) * chunks * stride, stride, chunks, [hw](uint32_t ch) { return hw[ch]; }, d);
  }
}

}  // namespace spindle::cuda
