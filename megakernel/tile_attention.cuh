// The ATTENTION tile (docs/numerics.md). Every sum the contract makes sequential stays
// sequential per output value: a thread owns one (q head, dim) accumulator and adds the
// positions in increasing order; the parallelism is across heads, dims and score dots.
#pragma once
#include <math.h>
#include <stdint.h>

#include "megakernel/block_arrival.cuh"
#include "megakernel/device_atomic.cuh"
#include "megakernel/device_dot.cuh"
#include "megakernel/device_failure.cuh"
#include "megakernel/tile_extras.cuh"
#include "megakernel/tile_layout.h"
#include "ops/attention.h"
#include "ops/context.h"
#include "ops/norm.h"
#include "ops/pmath.h"
#include "ops/qk_norm_rope.h"

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
  uint32_t group, D, chunks, context;  // group: the q heads of one tile (a kv head's, or a split's)
  uint32_t q_splits;
  uint32_t score_positions;  // S: positions of one score block (scores row stride)
  uint32_t kv_positions;     // T: positions whose K and V rows one stage holds (2T of one)
  size_t cache_stride, partial_stride;
};

// One warp: the head x (in shared memory, in place) normalised with the weights w (1/rms from
// the canonical dot of the head with itself) and its first 2·half dims rotated by the RoPE
// table row. A lane reads only the elements it writes once the dot is reduced.
__device__ inline void norm_rope_in_place(bf16* x, const bf16* w, const bf16* rope_row, uint32_t D, uint32_t half,
                                          float eps, uint32_t norm_kind) {
  // One chunk in flight: a head is 128 or 256 elements, one or no chunk a lane.
  const float inv = rms_inverse<float>(warp_dot<Src::Shared, Src::Shared, 1>(x, x, D), D, eps);
  with_norm_kind(norm_kind, [&](auto kind) {
    auto normed = [&](uint32_t d) {
      return rms_norm_element<float>(widen<float>(x[d]), inv, widen<float>(w[d]), kind.value);
    };
    for (uint32_t i = lane_id(); i < half; i += 32)
      rope_pair<float>(widen<float>(normed(i)), widen<float>(normed(i + half)), widen<float>(rope_row[i]),
                       widen<float>(rope_row[half + i]), x[i], x[i + half]);
    for (uint32_t d = 2 * half + lane_id(); d < D; d += 32) x[d] = normed(d);
  });
  __syncwarp();
}

// Copies rows [0, rows) of D bf16 of a (src_a → dst_a) and, when src_b is set, of b, into
// shared memory (rows D apart), by the block: every 16-byte piece is in flight at once
// (asynchronous copies, no registers). The caller waits (cp_async_wait_all) and syncs the
// block before reading them.
__device__ inline void stage_rows(const bf16* src_a, bf16* dst_a, const bf16* src_b, bf16* dst_b, size_t stride,
                                  uint32_t rows, uint32_t D) {
  if (stride == D) {  // contiguous rows: one run each
    stage_to_shared<Src::Data>(src_a, dst_a, rows * D);
    if (src_b) stage_to_shared<Src::Data>(src_b, dst_b, rows * D);
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

// True when a chunk of `len` positions is one score block whose K and V rows are staged once,
// together (by the tile's first round trip).
__device__ inline bool attn_single_stage(const AttnChunkShape& a, uint32_t len) {
  return len <= a.kv_positions && len <= a.score_positions;
}

// Stages the cache rows [b, e) of K or V (stage_rows) to kv and waits for them, but the step's
// own position r.end - 1 when `own` (in shared memory) holds its row: that row is copied from
// there, so that no tile reads back a row another tile of the kv head appends.
__device__ inline void stage_cached_rows(const AttnChunkShape& a, const bf16* cache, const bf16* own, PositionRange r,
                                         uint32_t b, uint32_t e, bf16* kv) {
  const bool mine = own && e == r.end;
  stage_rows(cache + size_t(b) * a.cache_stride, kv, nullptr, nullptr, a.cache_stride, e - b - mine, a.D);
  if (mine)
    for (uint32_t d = threadIdx.x; d < a.D; d += blockDim.x) kv[size_t(e - 1 - b) * a.D + d] = own[d];
  cp_async_wait_all();
  __syncthreads();
}

// The online-softmax partial {m, l, acc[D]} of each q head of the group (q̂ already in shared
// memory) over the non-empty positions r of the kv head's K and V rows, into its partial row
// (partial_row(j), in global or, past the tile's own data, shared memory). K and V rows are in
// shared memory (a single stage: already staged by the caller; else staged here, all loads of a
// stage in flight at once, the step's own k̂ and v from k_own and v_own when the chunk holds
// the position) and every sum runs from there in position order.
template <class PartialRow>
__device__ inline void attn_chunk_partials(const AttnChunkShape& a, const bf16* K, const bf16* V, const bf16* k_own,
                                           const bf16* v_own, PositionRange r, PartialRow partial_row, uint8_t* smem) {
  const uint32_t G = a.group, D = a.D, S = a.score_positions, T = a.kv_positions;
  float* m = reinterpret_cast<float*>(smem);  // [G]
  const bf16* q = reinterpret_cast<const bf16*>(smem + attn_q_offset());
  float* scores = reinterpret_cast<float*>(smem + attn_scores_offset(G, D));
  bf16* kv = reinterpret_cast<bf16*>(smem + attn_kv_offset(G, D, S));
  bf16* kv_second = kv + size_t(T) * D;  // V, when K and V are staged together
  const float scale = pm_rsqrt(float(D));
  const uint32_t len = r.end - r.begin;
  const bool both = attn_single_stage(a, len);
  const bool rescore = len > S;

  if (threadIdx.x < G) m[threadIdx.x] = -INFINITY;
  __syncthreads();
  float acc[kAttnPairsPerThread] = {};
  float l = 0.0f;
  // Pass 0 scores every block and keeps each head's max; pass 1 turns each block's scores into
  // weights (scoring it again unless it is the only one) and accumulates l and P·V. The score
  // code appears once (the persistent kernel's code size: docs/EXPERIMENTS.md).
  for (uint32_t pass = 0; pass < 2; ++pass) {
    for (uint32_t sb = r.begin; sb < r.end; sb += S) {
      const uint32_t se = min(sb + S, r.end), slen = se - sb;
      // The block's scores; unless staged already, K is staged 2T positions at a time.
      if (pass == 0 || rescore)
        for (uint32_t kb = sb; kb < se; kb += 2 * T) {
          const uint32_t ke = min(kb + 2 * T, se);
          if (!both) stage_cached_rows(a, K, k_own, r, kb, ke, kv);
          attn_scores(a, q, kv, kb, ke, scale, scores + (kb - sb));
        }
      if (pass == 0) {
        attn_tile_max(a, sb, slen, scores, m);
        continue;
      }
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
          stage_cached_rows(a, V, v_own, r, vb, ve, kv);
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

// Short chunks' partials run one warp per q head, with no block barrier between q̂ and the
// partial row: a lane holds one position's score and D / 32 dims of acc. Each barrier-separated
// phase of the block path costs 300-2000 cycles, so a few positions go faster this way; at 29-32
// positions a chunk, one warp's serial scores cost more (docs/EXPERIMENTS.md). A lane holds
// kDims dims of acc: 4 (heads up to 128) where the tile serves ATTENTION alone, whose plain build
// every dense task's code shares; 8 (heads up to 256, the hybrid families') where it serves
// GATED_ATTENTION too.
constexpr uint32_t kWarpChunkPositions = 16;
template <bool kGatedToo>
constexpr uint32_t kWarpChunkDims = kGatedToo ? 8 : 4;

// True when the warp path takes the step's chunks of `size` positions (chunk_size: every tile of
// the step takes the same path, a shorter last chunk too, since mixing the two paths in a step
// measured 1.8-2.5% slower): they fit the lanes and one stage, a head fits kDims dims a lane,
// and every q head of the group has a warp.
template <uint32_t kDims>
__device__ inline bool attn_warp_chunks(const AttnChunkShape& a, uint32_t size) {
  return size <= kWarpChunkPositions && a.D <= 32 * kDims && a.group <= warps_per_block() &&
         attn_single_stage(a, size);
}

template <uint32_t kDims>
struct WarpPartial {
  float m, l, acc[kDims];  // acc[i]: dim lane + 32 i
};

// One warp: the partial {m, l, acc[D]} of the q head q̂ (shared memory) over the chunk's `len`
// positions, whose K and V rows are staged at Ks and Vs (row t), each sum in the order of the
// block path (and of ops/attention.h attn_chunk_head). Every lane gets m and l.
// Out of line: inlined, it made the persistent kernel 1.5% slower at positions 1024 and 4096 on
// qwen3-0.6b, where it never runs (docs/EXPERIMENTS.md).
template <uint32_t kDims>
static __device__ __noinline__ WarpPartial<kDims> attn_warp_partial(const AttnChunkShape& a, const bf16* q,
                                                             const bf16* Ks, const bf16* Vs, uint32_t len) {
  const uint32_t D = a.D, lane = lane_id();
  const float scale = pm_rsqrt(float(D));
  float mine = 0.0f;  // lane t: s_t
  for (uint32_t t0 = 0; t0 < len; t0 += kScoreRows) {
    const bf16* rows[kScoreRows];
    for (int r = 0; r < kScoreRows; ++r) rows[r] = Ks + min(t0 + r, len - 1) * D;  // past len: a repeat
    float s[kScoreRows];
    warp_dot_rows<Src::Shared, Src::Shared, kScoreRows, 1>(rows, q, D, s);
#pragma unroll
    for (int r = 0; r < kScoreRows; ++r)
      if (lane == t0 + r) mine = s[r] * scale;
  }
  FirstMax best{-INFINITY, ~0u};
  if (lane < len && mine > best.value) best = {mine, lane};
  for (int off = 16; off > 0; off /= 2)
    best = first_max(best, {__shfl_xor_sync(0xffffffffu, best.value, off),
                            __shfl_xor_sync(0xffffffffu, best.position, off)});
  WarpPartial<kDims> w{best.value, 0.0f, {}};
  const float p = lane < len ? pm_exp(mine - w.m) : 0.0f;
  for (uint32_t t = 0; t < len; ++t) {
    const float pt = __shfl_sync(0xffffffffu, p, t);
    w.l = w.l + pt;
#pragma unroll
    for (uint32_t i = 0; i < kDims; ++i)
      if (lane + 32 * i < D) w.acc[i] = w.acc[i] + pt * bf16_to_f32(Vs[t * D + lane + 32 * i]);
  }
  return w;
}

// Floats src lies past a 16-byte boundary.
__device__ inline uint32_t skew16(const float* src) { return uint32_t(reinterpret_cast<uintptr_t>(src) & 15u) / 4u; }

// Stages n floats from src (partials other blocks wrote) to dst + skew16(src) (dst 16-byte
// aligned, with room for n + 3 floats), by 16-byte copies from src rounded down to 16 bytes
// (the view starts aligned, so those bytes exist). The caller waits.
__device__ inline void stage_floats(const float* src, float* dst, uint32_t n) {
  const uint32_t skew = skew16(src);
  stage_to_shared<Src::Data>(reinterpret_cast<const bf16*>(src - skew), reinterpret_cast<bf16*>(dst), 2 * (n + skew));
}

// The merge's shared memory: head h's rows from rows(h) = head(h) + its skew (the float offset,
// below 16 bytes, that its staged copy keeps; 0 for rows written there), after the tile's
// scratch (which keeps each head's max), then one weight per row.
struct MergeArea {
  float* base;
  uint32_t slot;
  __device__ float* head(uint32_t h) const { return base + h * slot; }
};
__device__ inline MergeArea merge_area(uint8_t* smem, uint32_t used, uint32_t stride) {
  return {reinterpret_cast<float*>(smem + kTileScratchBytes), merge_head_floats(used, stride)};
}

// Merges `heads` q heads' `used` partial rows (docs/numerics.md, the merge, through the element
// helpers of ops/attention.h), in shared memory at rows(h), into out (D values a head): each
// head's max, each chunk's weight, and one thread per (head, dim) merges the chunks in chunk
// order; with gates (GATED_ATTENTION: head h's D gates at gates + h * 2D), each output times
// its gate.
template <class Rows>
__device__ inline void merge_heads(Rows rows, const MergeArea& area, uint32_t stride, uint32_t used, uint32_t D,
                                   uint32_t heads, bf16* out, uint8_t* smem, const bf16* gates) {
  float* M = reinterpret_cast<float*>(smem);  // [heads] (the host keeps heads * 4 within the scratch)
  float* w = area.base + heads * area.slot;  // past the last head's rows
  __syncthreads();  // the rows are in place
  for (uint32_t h = threadIdx.x; h < heads; h += blockDim.x) M[h] = attn_merge_max<float>(rows(h), stride, used);
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < heads * used; i += blockDim.x) {
    const float* row = rows(i / used) + (i % used) * stride;
    w[i] = attn_merge_weight<float>(row, M[i / used]);
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < heads * D; i += blockDim.x) {
    const uint32_t h = i / D, d = i % D;
    const float* hw = w + h * used;
    bf16 o = attn_merge_element<float>(rows(h), stride, used, [hw](uint32_t ch) { return hw[ch]; }, d);
    if (gates) o = attn_gated_output<float>(o, load_bf16<Src::Data>(gates + size_t(h) * 2 * D + d));
    out[size_t(h) * D + d] = o;
  }
}

// Tile unit * chunks + chunk (tasks/opcodes.h, SP_OP_ATTENTION), unit = kv_head * q_splits +
// split, in as few round trips as the data allows; an empty chunk does nothing. (1) One
// asynchronous stage of the tile's raw q heads, the norm weights, the RoPE row, raw k and v when
// the chunk holds the position, and (a single stage) the chunk's cached K and V rows; (2) warps
// 0..G-1 normalise and rotate the q heads in place, and two more put k̂ and v in the staged
// rows and, in the kv head's first split, append them to the caches (no tile reads a row of
// its own step back from the caches, so the other splits need not wait for that); (3)
// the partials, by warp j for q head j when the step's chunks are short (attn_warp_chunks),
// else by the block; (4) the only non-empty chunk merges them at once, from registers or from
// shared memory; otherwise they are stored, thread 0 counts the tile in, and the group's last
// tile stages every non-empty chunk's rows in one round trip and merges. GATED_ATTENTION
// (`gated`, which only the copy built kGatedToo runs): its q heads each hold their gate beside
// them (q head h at h * 2D, its gate at h * 2D + D) and its outputs are multiplied by their gates.
template <bool kGatedToo>
__device__ inline void attention_tile(const AttnChunkShape& a, const SpTask& t, const TileContext& c,
                                      uint32_t unit, uint32_t chunk, uint32_t position, uint8_t* smem) {
  const bool gated = kGatedToo && t.op == SP_OP_GATED_ATTENTION;
  const SpGraphParams& p = *c.params;
  const uint32_t G = a.group, D = a.D, Hq = p.n_heads, Hkv = p.n_kv_heads, R = p.rotary_dim;
  const uint32_t kv_head = unit / a.q_splits;
  const bool appender = unit % a.q_splits == 0;
  const uint32_t n = position + 1;
  const PositionRange r = chunk_positions(n, a.chunks, chunk);
  const uint32_t len = r.end - r.begin;
  if (len == 0) return;
  const bf16* qkv = view_data<const bf16>(c, t.operand[0]);
  const size_t q_stride = size_t(gated ? 2 : 1) * D, k_begin = size_t(Hq) * q_stride;
  const bf16* gates = gated ? qkv + size_t(unit) * G * q_stride + D : nullptr;  // the tile's first head's
  bf16* K = view_data<bf16>(c, t.operand[3]) + size_t(kv_head) * a.context * a.cache_stride;
  bf16* V = view_data<bf16>(c, t.operand[3]) + size_t(Hkv + kv_head) * a.context * a.cache_stride;
  const bool appends = r.end == n, single = attn_single_stage(a, len);
  const uint32_t cached = appends ? len - 1 : len;  // rows written by earlier steps
  bf16* q = reinterpret_cast<bf16*>(smem + attn_q_offset());
  bf16* kv = reinterpret_cast<bf16*>(smem + attn_kv_offset(G, D, a.score_positions));
  bf16* kv_second = kv + size_t(a.kv_positions) * D;
  bf16* consts = reinterpret_cast<bf16*>(smem + attn_consts_offset(G, D, a.score_positions, a.kv_positions));
  const AttnConsts at = attn_consts(D, R);
  bf16 *q_norm = consts + at.q_norm, *k_norm = consts + at.k_norm, *rope = consts + at.rope;
  bf16 *k_new = consts + at.k_new, *v_new = consts + at.v_new;
  if (gated)
    for (uint32_t j = 0; j < G; ++j) stage_to_shared<Src::Data>(qkv + (size_t(unit) * G + j) * q_stride, q + j * D, D);
  else
    stage_to_shared<Src::Data>(qkv + size_t(unit) * G * D, q, G * D);
  stage_to_shared<Src::Resident>(view_data<const bf16>(c, t.operand[1]), q_norm, D);
  stage_to_shared<Src::Resident>(
      view_data<const bf16>(c, t.operand[4]) + size_t(position) * c.views[t.operand[4]].row_stride, rope, R);
  if (appends) {
    stage_to_shared<Src::Resident>(view_data<const bf16>(c, t.operand[2]), k_norm, D);
    stage_to_shared<Src::Data>(qkv + k_begin + size_t(kv_head) * D, k_new, D);
    stage_to_shared<Src::Data>(qkv + k_begin + size_t(Hkv + kv_head) * D, v_new, D);
  }
  if (single)
    stage_rows(K + size_t(r.begin) * a.cache_stride, kv, V + size_t(r.begin) * a.cache_stride, kv_second,
               a.cache_stride, cached, D);
  cp_async_wait_all();
  __syncthreads();
  const uint32_t warps = appends ? G + 2 : G;
  for (uint32_t w = warp_id(); w < warps; w += warps_per_block()) {
    bf16* row = w < G ? q + size_t(w) * D : w == G ? k_new : v_new;
    if (w <= G) norm_rope_in_place(row, w < G ? q_norm : k_norm, rope, D, R / 2, p.rms_eps, p.norm_kind);
    if (w < G) continue;
    bf16* cache_row = (w == G ? K : V) + size_t(position) * a.cache_stride;
    bf16* staged_row = (w == G ? kv : kv_second) + size_t(cached) * D;
    for (uint32_t d = lane_id(); d < D; d += 32) {
      if (appender) cache_row[d] = row[d];
      if (single) staged_row[d] = row[d];
    }
  }
  __syncthreads();  // q̂, k̂ and the staged rows are complete
  const uint32_t used = nonempty_chunks(n, a.chunks);
  float* partials = view_data<float>(c, t.operand[5]) + size_t(unit) * G * a.chunks * a.partial_stride;
  auto head_partials = [&](uint32_t j) { return partials + size_t(j) * a.chunks * a.partial_stride; };
  const MergeArea area = merge_area(smem, used, uint32_t(a.partial_stride));
  constexpr uint32_t kDims = kWarpChunkDims<kGatedToo>;
  if (attn_warp_chunks<kDims>(a, chunk_size(n, a.chunks))) {
    const uint32_t j = warp_id();
    if (j < G) {
      const WarpPartial<kDims> w = attn_warp_partial<kDims>(a, q + size_t(j) * D, kv, kv_second, len);
      if (used == 1) {  // the merge of this one chunk, from registers
        bf16* out = view_data<bf16>(c, t.operand[6]) + (size_t(unit) * G + j) * D;
        const float weight = attn_merge_weight<float>(&w.m, attn_merge_max<float>(&w.m, 0, 1));
#pragma unroll
        for (uint32_t i = 0; i < kDims; ++i) {
          const uint32_t d = lane_id() + 32 * i;
          if (d >= D) continue;
          bf16 o = attn_merge_lone_element<float>(w.l, w.acc[i], weight);
          if (gated) o = attn_gated_output<float>(o, load_bf16<Src::Data>(gates + j * q_stride + d));
          out[d] = o;
        }
        return;
      }
      float* row = head_partials(j) + chunk * a.partial_stride;
      if (lane_id() == 0) {
        row[0] = w.m;
        row[1] = w.l;
      }
#pragma unroll
      for (uint32_t i = 0; i < kDims; ++i)
        if (lane_id() + 32 * i < D) row[2 + lane_id() + 32 * i] = w.acc[i];
    }
    if (used == 1) return;
  } else {
    attn_chunk_partials(a, K, V, appends ? k_new : nullptr, appends ? v_new : nullptr, r, [&](uint32_t j) {
      return used == 1 ? area.head(j) : head_partials(j) + chunk * a.partial_stride;
    }, smem);
  }
  if (used > 1) {
    if (!block_arrived_last(view_data<uint32_t>(c, t.operand[7])[unit], used)) return;
    for (uint32_t j = 0; j < G; ++j) stage_floats(head_partials(j), area.head(j), used * a.partial_stride);
    cp_async_wait_all();
  }
  merge_heads([&](uint32_t j) { return area.head(j) + (used > 1 ? skew16(head_partials(j)) : 0u); }, area,
              uint32_t(a.partial_stride), used, D, G, view_data<bf16>(c, t.operand[6]) + size_t(unit) * G * D, smem,
              gates);
}

// The persistent kernel's `extras` carry the step's position; without them (per-op kernels) it is
// loaded from the step state, one more round trip before the first stage: 0.5-1.7% of qwen3-0.6b's
// megakernel (docs/EXPERIMENTS.md). The kPositionFromState test never fails in
// the persistent kernel, but without it ptxas spills 4 bytes there, which cost 2-3%.
// kGatedToo: the copy that runs GATED_ATTENTION's tasks as well as ATTENTION's (attention_tile).
template <bool kGatedToo>
__device__ inline void run_attention(const SpTask& t, const TileContext& c, uint32_t score_positions,
                                     uint32_t kv_positions, uint8_t* smem, const TaskSite& site,
                                     const TileExtras* extras) {
  const SpGraphParams& p = *c.params;
  const uint32_t position =
      extras && extras->position != kPositionFromState ? extras->position : load_data(&c.state->position);
  if (position >= p.context) return fail_task(site, kFailPositionRange, position, p.context);
  const AttnChunkShape a{attn_tile_heads(p),
                         p.head_dim,
                         p.attn_chunks,
                         p.context,
                         p.attn_q_splits,
                         score_positions,
                         kv_positions,
                         c.views[t.operand[3]].row_stride,
                         c.views[t.operand[5]].row_stride};
  for (uint32_t tile = t.tile_begin; tile < t.tile_end; ++tile) {
    attention_tile<kGatedToo>(a, t, c, tile / a.chunks, tile % a.chunks, position, smem);
    __syncthreads();  // the next tile reuses shared memory
  }
}

}  // namespace spindle::cuda
