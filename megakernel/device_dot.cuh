// Device loads and the canonical dot (ops/dot.h) done the way it was designed for: one warp,
// lane l owning elements [256j + 8l, 256j + 8l + 8) through 16-byte loads, each product added
// to the lane's sum (add_product), then the butterfly with __shfl_xor_sync. Lane l < off
// computes lane[l] + lane[l + off] exactly as the host does; IEEE addition is commutative, so
// every lane ends with the same bits.
#pragma once
#include <stdint.h>

#include <type_traits>

#include "megakernel/ptx.cuh"
#include "megakernel/tile_layout.h"
#include "ops/bf16.h"
#include "ops/dot.h"

namespace spindle::cuda {

// Where an operand lives, which decides how it is read:
//  Weight: read-only for the whole launch (weight matrices, embedding rows), streamed through
//          once, so without L1 allocation and evicted first from L2 (ptx.cuh, l2_evict_first);
//          by generic loads, so that the same code reads a projection's rows from global memory
//          or from the persistent kernel's preloaded copy in shared memory (which
//          warp_dot_rows_shared reads faster where K allows).
//  Data:   written by other tasks of the same launch (activations, caches, partials, step
//          state): read at L2 (ld.global.cg), so no stale L1 line is ever seen.
//  Resident: read-only and small, read by every block at every layer or step (norm weights,
//          the RoPE table): kept in L2 with an evict-last policy, since the streamed weights
//          would evict them between two uses and each block would wait on HBM for them.
//  Shared: this block's shared memory.
enum class Src { Weight, Data, Resident, Shared };

template <Src S>
__device__ __forceinline__ uint4 load16(const void* p) {
  if constexpr (S == Src::Weight) {
    return ld_global_no_l1_v4(p, l2_evict_first());
  } else if constexpr (S == Src::Resident) {
    return ld_global_nc_v4(p, l2_evict_last());
  } else if constexpr (S == Src::Data) {
    return __ldcg(reinterpret_cast<const uint4*>(p));
  } else {
    return *reinterpret_cast<const uint4*>(p);
  }
}

template <Src S>
__device__ __forceinline__ bf16 load_bf16(const bf16* p) {
  if constexpr (S == Src::Weight) {
    return ld_global_no_l1_u16(p, l2_evict_first());
  } else if constexpr (S == Src::Resident) {
    return ld_global_nc_u16(p, l2_evict_last());
  } else if constexpr (S == Src::Data) return __ldcg(reinterpret_cast<const unsigned short*>(p));
  else return *p;
}

// Step state, partials, logits: values other tasks of this launch wrote.
__device__ __forceinline__ uint32_t load_data(const uint32_t* p) { return __ldcg(p); }
__device__ __forceinline__ float load_data(const float* p) { return __ldcg(p); }

__device__ __forceinline__ void unpack_bf16x8(uint4 u, float (&v)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = f32_from_bits(w[i] << 16);  // little-endian: the lower half is the earlier element
    v[2 * i + 1] = f32_from_bits(w[i] & 0xffff0000u);
  }
}

// acc + a * b for two bf16 values a and b, as the host computes it (the product rounded to f32,
// then added), in one fused multiply-add: a product of two 8-bit significands has at most 16
// bits, so it is exact in f32 and the fused add rounds the same sum, except for a product
// below 2^-134 meeting a nonzero sum below 2^-100 (docs/numerics.md). One instruction instead
// of two (the build passes --fmad=false, so nothing else is fused).
__device__ __forceinline__ float add_product(float acc, float a, float b) { return fmaf(a, b, acc); }

// One lane's share of a 16-byte block in the canonical order (ops/dot.h): acc += a[e] * b[e]
// for its 8 bf16 elements in turn.
__device__ __forceinline__ void accumulate_bf16x8(float& acc, uint4 a, const float (&b)[8]) {
  float af[8];
  unpack_bf16x8(a, af);
#pragma unroll
  for (int e = 0; e < kDotVec; ++e) acc = add_product(acc, af[e], b[e]);
}

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

__device__ __forceinline__ uint32_t lane_id() { return threadIdx.x & 31u; }
__device__ __forceinline__ uint32_t warp_id() { return threadIdx.x >> 5; }
__device__ __forceinline__ uint32_t warps_per_block() { return blockDim.x >> 5; }

__device__ __forceinline__ float warp_butterfly_sum(float v) {
#pragma unroll
  for (int off = kDotLanes / 2; off > 0; off /= 2) v = v + __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Row i's vector: one b for every row, or b[i], one a row.
__device__ __forceinline__ const bf16* row_vector(const bf16* b, int) { return b; }
template <int R>
__device__ __forceinline__ const bf16* row_vector(const bf16* const (&b)[R], int i) { return b[i]; }

// out[i] = sum_k â_i[k] · b̂_i[k] over n bf16 elements, for R rows a_i against one vector b (b a
// pointer) or each against its own (b an array of R: the routed experts' rows against their
// slots' activations), each in the canonical order; every lane of the calling warp gets the
// results. Each lane issues the 16-byte loads of U of its chunks for all R rows before using
// the first, so R x U loads are in flight per lane. A chunk cut by n, or unaligned operands,
// are read element by element in the same order.
template <Src A, Src B, int R, int U, class BV>
__device__ __forceinline__ void warp_dot_rows(const bf16* const (&a)[R], const BV& b, uint32_t n, float (&out)[R]) {
  constexpr bool kOneB = std::is_same_v<BV, const bf16*> || std::is_same_v<BV, bf16*>;
  float acc[R];
  bool vec = aligned16(row_vector(b, 0));
#pragma unroll
  for (int i = 0; i < R; ++i) {
    acc[i] = 0.0f;
    vec = vec && aligned16(a[i]);
    if constexpr (!kOneB) vec = vec && aligned16(b[i]);
  }
  const uint32_t first = lane_id() * kDotVec;
  const uint32_t full = vec ? n / kDotVec * kDotVec : 0;  // [0, full): whole chunks, vector loads
  // b in shared memory is read when used: holding U chunks of it would cost 4U registers.
  constexpr bool kLateB = B == Src::Shared || !kOneB;
  for (uint32_t k0 = first; k0 < full; k0 += U * kDotBlock) {
    uint4 av[R][U], bv[kLateB ? 1 : U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (k0 + u * kDotBlock >= full) break;
      if constexpr (!kLateB) bv[u] = load16<B>(row_vector(b, 0) + k0 + u * kDotBlock);
#pragma unroll
      for (int i = 0; i < R; ++i) av[i][u] = load16<A>(a[i] + k0 + u * kDotBlock);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (k0 + u * kDotBlock >= full) break;
      float bf[8];
      if constexpr (kOneB) {
        unpack_bf16x8(kLateB ? load16<B>(b + k0 + u * kDotBlock) : bv[u], bf);
#pragma unroll
        for (int i = 0; i < R; ++i) accumulate_bf16x8(acc[i], av[i][u], bf);
      } else {
#pragma unroll
        for (int i = 0; i < R; ++i) {
          unpack_bf16x8(load16<B>(b[i] + k0 + u * kDotBlock), bf);
          accumulate_bf16x8(acc[i], av[i][u], bf);
        }
      }
    }
  }
  // The lane's chunks past `full`, in order: all of them when unaligned, else the one cut by n.
  uint32_t k0 = first;
  if (k0 < full) k0 += (full - k0 + kDotBlock - 1) / kDotBlock * kDotBlock;
  for (; k0 < n; k0 += kDotBlock)
    for (uint32_t k = k0; k < n && k < k0 + kDotVec; ++k) {
      const float bk = bf16_to_f32(load_bf16<B>(row_vector(b, 0) + k));
#pragma unroll
      for (int i = 0; i < R; ++i)
        acc[i] = add_product(acc[i], bf16_to_f32(load_bf16<A>(a[i] + k)),
                             kOneB ? bk : bf16_to_f32(load_bf16<B>(row_vector(b, i) + k)));
    }
#pragma unroll
  for (int i = 0; i < R; ++i) out[i] = warp_butterfly_sum(acc[i]);
}

// Each lane's canonical-dot sums (before the butterfly) of R rows and b all in shared memory,
// given as shared-window addresses of their first elements, for n a multiple of U chunks
// (U * kDotBlock elements; kSharedDotSpan by default): each round issues every row's loads of U
// chunks, then their products, with no exit in between, through ld.shared and 32-bit
// addresses. In a microbenchmark (docs/EXPERIMENTS.md), with the
// butterflies, it took 1210 cycles for 4 rows of 1024 against warp_dot_rows' 1817, and 1247
// against 2051 for one row of 3072; same bits.
template <int R, int U = kSharedDotChunks>
__device__ __forceinline__ void warp_lane_sums_shared(const uint32_t (&a)[R], uint32_t b, uint32_t n, float (&acc)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = 0.0f;
  const uint32_t lane_bytes = lane_id() * kDotVec * 2u;
#pragma unroll 1
  for (uint32_t k = 0; k < n; k += U * kDotBlock) {
    uint4 av[R][U];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < R; ++i) av[i][u] = ld_shared_v4(a[i] + (k + u * kDotBlock) * 2u + lane_bytes);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float bf[8];
      unpack_bf16x8(ld_shared_v4(b + (k + u * kDotBlock) * 2u + lane_bytes), bf);
#pragma unroll
      for (int i = 0; i < R; ++i) accumulate_bf16x8(acc[i], av[i][u], bf);
    }
  }
}

// warp_dot_rows for R rows and b all in shared memory: warp_lane_sums_shared's lane sums, each
// row's butterfly.
template <int R, int U = kSharedDotChunks>
__device__ __forceinline__ void warp_dot_rows_shared(const uint32_t (&a)[R], uint32_t b, uint32_t n, float (&out)[R]) {
  float acc[R];
  warp_lane_sums_shared<R, U>(a, b, n, acc);
#pragma unroll
  for (int i = 0; i < R; ++i) out[i] = warp_butterfly_sum(acc[i]);
}

// One step of warp_butterfly_rows8 at distance `off`: each lane keeps half of its N rows' sums
// (the upper half where its `off` bit is set) added to its partner's, and sends the other half.
template <int N>
__device__ __forceinline__ void butterfly_keep_half(const float (&in)[N], float (&out)[N / 2], uint32_t off) {
  const bool up = lane_id() & off;
#pragma unroll
  for (int i = 0; i < N / 2; ++i)
    out[i] = (up ? in[i + N / 2] : in[i]) + __shfl_xor_sync(~0u, up ? in[i] : in[i + N / 2], off);
}

// The butterflies of 8 rows' lane sums, the rows halved at each of the first three steps (each
// lane sends half of its rows, keeps the others): 9 shuffles where 8 butterflies take 40. At
// every step the kept sum is the canonical lane's, lane[l] + lane[l + off] (IEEE addition
// commutes), so each row's dot has the canonical bits. Lane l ends with row (l >> 2) & 7's.
__device__ __forceinline__ float warp_butterfly_rows8(const float (&acc)[8]) {
  float four[4], two[2], one[1];
  butterfly_keep_half(acc, four, 16);  // rows 4-7 to the upper half of the lanes, 0-3 to the lower
  butterfly_keep_half(four, two, 8);
  butterfly_keep_half(two, one, 4);
  const float v = one[0] + __shfl_xor_sync(~0u, one[0], 2);
  return v + __shfl_xor_sync(~0u, v, 1);
}

// One row: U chunks of loads in flight per lane.
template <Src A, Src B, int U = 8>
__device__ __forceinline__ float warp_dot(const bf16* a, const bf16* b, uint32_t n) {
  const bf16* rows[1] = {a};
  float out[1];
  warp_dot_rows<A, B, 1, U>(rows, b, n, out);
  return out[0];
}

// Starts an asynchronous 16-byte copy global → shared, read at L2 (like ld.global.cg), with
// Resident's evict-last policy when asked; the thread's copies are complete after
// cp_async_wait_all.
template <Src S = Src::Data>
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const uint32_t d = uint32_t(__cvta_generic_to_shared(dst));
  if constexpr (S == Src::Resident)
    cp_async_cg16(d, src, l2_evict_last());
  else
    cp_async_cg16(d, src);
}

// Starts copying src[0..n) (bf16, global, read as S says) to dst (shared) by the whole block:
// asynchronous 16-byte copies where both are aligned, so every piece is in flight at once, and
// the rest element by element. Complete for the calling thread after cp_async_wait_all.
template <Src S>
__device__ __forceinline__ void stage_to_shared(const bf16* src, bf16* dst, uint32_t n) {
  const uint32_t head = aligned16(src) && aligned16(dst) ? n / kDotVec * kDotVec : 0;
  for (uint32_t k = threadIdx.x * kDotVec; k < head; k += blockDim.x * kDotVec) cp_async16<S>(dst + k, src + k);
  for (uint32_t k = head + threadIdx.x; k < n; k += blockDim.x) dst[k] = load_bf16<S>(src + k);
}

}  // namespace spindle::cuda
