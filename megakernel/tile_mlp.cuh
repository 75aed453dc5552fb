// The MLP gang task's tile (ops/mlp.h, docs/numerics.md "MLP"): phase 0 computes a member's
// activations from the normalised hidden state (shared memory) and down's dots over their
// columns; phase 1 sums the gang's pieces over the member's share of the rows, and the last
// gang to do so for that share adds the gangs' sums to hidden. Every dot is the canonical one,
// so the bits are the CPU reference's. In the persistent kernel the down weight is piece-major
// (repack_down.h), and a member running at once with its gang has its weights copied into
// shared memory before its wait (task_copies.h); the per-op kernels read the row-major
// weight from global memory, a warp a row.
#pragma once
#include <stdint.h>

#include "megakernel/block_arrival.cuh"
#include "megakernel/gang_barrier.cuh"
#include "megakernel/ptx.cuh"
#include "megakernel/repack_down.h"
#include "megakernel/tile_projection.cuh"
#include "ops/mlp.h"

namespace spindle::cuda {

// Where a member's weights are read: its gate and up rows (`gu_stride` apart), and its piece
// of down: row-major (`d_stride` apart, from the piece's first column) or piece-major ([H][P]).
struct MlpWeights {
  const bf16 *gate, *up, *down;
  uint32_t gu_stride, d_stride;
  bool piece_major, shared;
};

__device__ inline MlpWeights mlp_weights(const SpTask& t, const TileContext& c, const MlpShape& s, uint32_t index) {
  const SpView &Wg = c.views[t.operand[0]], &Wd = c.views[t.operand[2]];
  const size_t first_row = size_t(index) * s.piece * Wg.row_stride;
  const bool piece_major = Wd.row_stride == kPieceMajorStride;
  const bf16* down = view_data<const bf16>(c, t.operand[2]) +
                     (piece_major ? size_t(index) * s.H * s.piece : size_t(index) * s.piece);
  return {view_data<const bf16>(c, t.operand[0]) + first_row, view_data<const bf16>(c, t.operand[1]) + first_row,
          down, Wg.row_stride, Wd.row_stride, piece_major, false};
}

// The canonical dot (ops/dot.h) of n <= 64 elements in one thread: lanes past n / 8 hold +0 (a
// lane's sum starts at +0 and never becomes -0), which the butterfly's rounds at offsets 16 and
// 8 add without effect, so the rounds at 4, 2 and 1 over 8 lanes give the warp's bits.
__device__ __forceinline__ float thread_dot64(const bf16* a, const bf16* b, uint32_t n) {
  float lane[8];
#pragma unroll
  for (uint32_t l = 0; l < 8; ++l) {
    lane[l] = 0.0f;
    if (8u * l < n) {
      float af[8], bf[8];
      unpack_bf16x8(*reinterpret_cast<const uint4*>(a + 8u * l), af);
      unpack_bf16x8(*reinterpret_cast<const uint4*>(b + 8u * l), bf);
#pragma unroll
      for (int e = 0; e < 8; ++e) lane[l] = add_product(lane[l], af[e], bf[e]);
    }
  }
#pragma unroll
  for (uint32_t off = 4; off > 0; off /= 2)
#pragma unroll
    for (uint32_t l = 0; l < off; ++l) lane[l] = lane[l] + lane[l + off];
  return lane[0];
}

// Phase 0 of the member holding piece `index`; n is the normalised hidden state. kGroupGlobal:
// whether rows read from global memory are read in groups, as the per-op kernels do; the
// persistent kernel, where only whole gangs read them, takes a row (pair) at a time in less
// code (run_mlp says why that matters). A preloaded copy's gate and up rows go a pair at a
// time too: GATE_UP's groups of two pairs made qwen3-0.6b's fused MLP 2.3% slower here, its
// code 11 KB larger (docs/EXPERIMENTS.md).
template <bool kGroupGlobal>
__device__ inline void mlp_piece(const SpTask& t, const TileContext& c, const MlpShape& s, const MlpWeights& w,
                                 uint32_t index, const bf16* n, uint8_t* smem) {
  const uint32_t stride = warps_per_block();
  bf16* act = reinterpret_cast<bf16*>(smem + mlp_act_offset(s.H));
  const auto finish_act = [&]<int R>(uint32_t j0, const float (&dots)[2 * R]) {
    if (lane_id() == 0)
      for (int i = 0; i < R; ++i) act[j0 + i * stride] = swiglu(rounded(dots[2 * i]), rounded(dots[2 * i + 1]));
  };
  if (w.shared && s.H % kSharedDotSpan == 0) {
    for_row_groups<1>(warp_id(), s.piece, stride, [&]<int R>(uint32_t j0) {
      float dots[2 * R];
      uint32_t rows[2 * R];
      for (int i = 0; i < R; ++i) {
        rows[2 * i] = smem_address(w.gate + size_t(j0 + i * stride) * w.gu_stride);
        rows[2 * i + 1] = smem_address(w.up + size_t(j0 + i * stride) * w.gu_stride);
      }
      warp_dot_rows_shared<2 * R>(rows, smem_address(opaque(n)), s.H, dots);
      finish_act.template operator()<R>(j0, dots);
    });
  } else {
    for_row_groups<kGroupGlobal ? kGateUpGroupRows : 1>(warp_id(), s.piece, stride, [&]<int R>(uint32_t j0) {
      float dots[2 * R];
      const bf16* rows[2 * R];
      for (int i = 0; i < R; ++i) {
        rows[2 * i] = w.gate + size_t(j0 + i * stride) * w.gu_stride;
        rows[2 * i + 1] = w.up + size_t(j0 + i * stride) * w.gu_stride;
      }
      warp_dot_rows<Src::Weight, Src::Shared, 2 * R, chunks_in_flight(2 * R)>(rows, n, s.H, dots);
      finish_act.template operator()<R>(j0, dots);
    });
  }
  __syncthreads();
  float* out = view_data<float>(c, t.operand[5]) + size_t(index) * c.views[t.operand[5]].row_stride;
  if (w.piece_major && s.piece <= 64 && aligned16(w.down)) {  // a thread a row, its P columns contiguous
    for (uint32_t i = threadIdx.x; i < s.H; i += blockDim.x) out[i] = thread_dot64(w.down + size_t(i) * s.piece, act, s.piece);
    return;
  }
  const uint32_t row_stride = w.piece_major ? s.piece : w.d_stride;
  for_row_groups<kGroupGlobal ? kGemvGroupRows : 1>(warp_id(), s.H, stride, [&]<int R>(uint32_t i0) {
    const bf16* rows[R];
    for (int i = 0; i < R; ++i) rows[i] = w.down + size_t(i0 + i * stride) * row_stride;
    float dots[R];
    warp_dot_rows<Src::Weight, Src::Shared, R, 1>(rows, act, s.piece, dots);
    if (lane_id() == 0)
      for (int i = 0; i < R; ++i) out[i0 + i * stride] = dots[i];
  });
}

// The sum, in index order, of the n floats p[0], p[stride], ...: the first of them as it is,
// then each added. They are loads from the L2 (other blocks' partials), so a batch of them is
// asked for before the first add: summed as each arrived, a gang's share took 1.3 µs of the
// MLP's 16 on qwen3-0.6b (docs/EXPERIMENTS.md).
__device__ __forceinline__ float sum_in_order(const float* p, size_t stride, uint32_t n) {
  constexpr uint32_t kBatch = 16;
  float sum = 0.0f;
  for (uint32_t m0 = 0; m0 < n; m0 += kBatch) {
    float v[kBatch];
#pragma unroll
    for (uint32_t k = 0; k < kBatch; ++k) v[k] = m0 + k < n ? load_data(p + (m0 + k) * stride) : 0.0f;
#pragma unroll
    for (uint32_t k = 0; k < kBatch; ++k)
      if (m0 + k < n) sum = m0 + k == 0 ? v[k] : sum + v[k];
  }
  return sum;
}

// Phase 1 of rank `rank` of gang `gang`.
__device__ inline void mlp_gang_sum(const SpTask& t, const TileContext& c, const MlpShape& s, uint32_t gang,
                                    uint32_t rank) {
  const uint32_t i0 = sp_gang_share(s.H, s.width, rank), i1 = sp_gang_share(s.H, s.width, rank + 1);
  const size_t ps = c.views[t.operand[5]].row_stride;
  const float* pieces = view_data<const float>(c, t.operand[5]) + size_t(gang) * s.width * ps;
  float* sums = view_data<float>(c, t.operand[5]) + size_t(s.pieces) * ps;
  for (uint32_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) sums[gang * ps + i] = sum_in_order(pieces + i, ps, s.width);
  if (!block_arrived_last(view_data<uint32_t>(c, t.operand[6])[rank], s.gangs)) return;
  bf16* hidden = view_data<bf16>(c, t.operand[3]);
  for (uint32_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    const float y = sum_in_order(sums + i, ps, s.gangs);
    hidden[i] = to_bf16(widen<float>(load_bf16<Src::Data>(hidden + i)) + widen<float>(to_bf16(y)));
  }
}

// A member's task: when ganged(gang) (the persistent kernel running the members at once) its own
// phases around the barrier, its weights from the preloaded copy when `extras` has one; else
// rank 0 runs the whole gang, rank by rank, and the other ranks nothing. Each phase's code is
// here once for both modes: inlined twice, the MLP tile's code made the two-hop build run a
// plain qwen3-0.6b graph 14% slower, although a plain graph never runs it
// (docs/EXPERIMENTS.md). kGroupGlobal as mlp_piece.
template <bool kGroupGlobal>
__device__ inline void run_mlp(const SpTask& t, const TileContext& c, uint8_t* smem, const TaskSite& site,
                               const TileExtras* extras, const GangBarrier& gang) {
  const MlpShape s = mlp_shape(t, c.views[t.operand[2]]);
  const uint32_t rank = s.width > 1 ? t.gang_rank : 0u;
  if (!ganged(gang) && rank != 0) return;
  const bf16* n = projection_input(view_data<const bf16>(c, t.operand[3]), s.H, view_data<const bf16>(c, t.operand[4]),
                                   *c.params, smem, nullptr);
  const uint32_t first = ganged(gang) ? rank : 0u, end = ganged(gang) ? rank + 1u : s.width;  // the block's ranks
  const bool preloaded = ganged(gang) && extras && extras->preload && extras->preload->bytes;
  for (uint32_t r = first; r < end; ++r) {
    const uint32_t index = s.index - rank + r;
    MlpWeights w = mlp_weights(t, c, s, index);
    if (preloaded) {
      mbar_wait(extras->preload->bar, extras->preload->parity);
      // Known only after the wait, so no load of the copy is moved above it (as task_weights).
      const bf16* copy = opaque(reinterpret_cast<const bf16*>(smem + extras->preload->at));
      const uint32_t span = uint32_t(preload_span_bytes(s.piece, s.H, w.gu_stride)) / 2u;
      w = {copy, copy + span, copy + 2u * span, w.gu_stride, w.d_stride, true, true};
    }
    mlp_piece<kGroupGlobal>(t, c, s, w, index, n, smem);
    __syncthreads();  // the next piece's activations reuse shared memory
  }
  if (ganged(gang) && !gang_barrier(gang, 0, site)) return;
  for (uint32_t r = first; r < end; ++r) {
    mlp_gang_sum(t, c, s, s.gang, r);
    __syncthreads();
  }
}

}  // namespace spindle::cuda
