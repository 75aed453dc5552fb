// GEMV and GATE_UP tiles (docs/numerics.md): the input is normalised once per task into
// shared memory, then each warp takes rows r0 + warp, r0 + warp + warps, … and computes each
// row's canonical dot against the bf16 weights, which it reads itself (16-byte loads, several
// in flight).
#pragma once
#include <math.h>
#include <stdint.h>

#include "megakernel/block_arrival.cuh"
#include "megakernel/device_dot.cuh"
#include "megakernel/ptx.cuh"
#include "megakernel/tile_extras.cuh"
#include "megakernel/tile_layout.h"
#include "ops/argmax.h"
#include "ops/context.h"
#include "ops/gemv.h"
#include "ops/norm.h"
#include "tasks/gemv_piece.h"
#include "tasks/opcodes.h"
#include "tasks/view.h"

namespace spindle::cuda {

// A projection task's weights: rows [tile_begin, tile_end) of one matrix (GEMV) or of two
// (GATE_UP: gate, up) with the same shape; row r of matrix m at first[m] + (r - tile_begin) *
// row_stride.
struct ProjectionWeights {
  const bf16* first[2];
  uint32_t matrices, K, row_stride;
  bool shared;  // first[] point into the persistent kernel's preloaded copy

  // Whether warp_dot_rows_shared takes these rows.
  __device__ bool shared_dot() const { return shared && K % kSharedDotSpan == 0; }
  // Shared-window address of row r's start (r counted from the task's first row) in matrix m.
  __device__ uint32_t shared_row(uint32_t m, uint32_t r) const {
    return smem_address(first[m]) + r * row_stride * 2u;
  }

  // One matrix's rows as one span, from the first row's start to the last row's end.
  __device__ uint64_t span_bytes(const SpTask& t) const {
    return preload_span_bytes(t.tile_end - t.tile_begin, K, row_stride);
  }
};

// The task's rows in global memory.
__device__ inline ProjectionWeights projection_weights(const SpTask& t, const TileContext& c) {
  const SpView& W = c.views[t.operand[0]];
  const size_t skip = size_t(t.tile_begin) * W.row_stride;
  const uint32_t matrices = sp_projection_matrices(t.op);
  return {{view_data<const bf16>(c, t.operand[0]) + skip,
           matrices == 2 ? view_data<const bf16>(c, t.operand[1]) + skip : nullptr},
          matrices,
          W.cols,
          W.row_stride,
          false};
}

// Warp 1 of the persistent kernel's plain build, while thread 0 waits for the task: starts the
// bulk copies of a projection task's weight spans to shared memory (projection_preload_offset,
// one after the other), lane m issuing matrix m's, when preload_end_bytes allows them within
// `max_bytes` and `smem_bytes`, the weights live in a weight arena and their rows start 16-byte
// aligned, as the copy engine needs, and records them in p; p.bytes (0 on entry) stays 0 for
// every other task. Not thread 0: issuing the copies held its poll (0.3-0.8% slower on
// qwen3-0.6b), and one lane issuing both spans is held longer (0.9-1.5%; docs/EXPERIMENTS.md).
// The same rule as the host's task_copy (task_copies.h), which the two-hop build's copies come
// from: read from the staged record instead, they made the plain build 0.5-0.8% slower on
// qwen3-0.6b.
__device__ inline void start_weight_preload(const SpTask& t, const TileContext& c, uint8_t* smem, uint32_t max_bytes,
                                            uint32_t smem_bytes, WeightPreload& p) {
  if (!sp_projection_matrices(t.op) || t.tile_end <= t.tile_begin) return;
  const ProjectionWeights pw = projection_weights(t, c);
  const uint32_t offset = projection_preload_offset(pw.K);
  const uint64_t end =
      preload_end_bytes(pw.matrices, t.tile_end - t.tile_begin, pw.K, pw.row_stride, max_bytes, smem_bytes);
  if (!end) return;
  if (c.views[t.operand[0]].arena < SP_ARENA_WEIGHTS0) return;  // copied before the wait: weights only
  if (!aligned16(pw.first[0]) || (pw.matrices == 2 && !aligned16(pw.first[1]))) return;
  const uint32_t m = lane_id(), span = uint32_t(pw.span_bytes(t));
  if (m == 0) mbar_arrive_expect_tx(p.bar, uint32_t(end - offset));
  __syncwarp();  // the expected bytes are set before any copy can complete
  if (m < pw.matrices) {
    fence_proxy_async_shared();  // the block's last accesses to this memory come before the copy's writes
    // Constant indices only (not pw.first[m]): an array indexed at run time would live in local
    // memory, which every acquire empties from the L1.
    bulk_copy_to_shared(smem_address(smem + offset + m * span), m ? pw.first[1] : pw.first[0], span, p.bar);
  }
  if (m == 0) {
    p.bytes = uint32_t(end - offset);
    p.at = offset;
  }
}

// Every thread: where the tile reads the task's rows: the preloaded copy in shared memory,
// once it has landed, or else global memory.
__device__ inline ProjectionWeights task_weights(const SpTask& t, const TileContext& c, uint8_t* smem,
                                                 const TileExtras* extras) {
  ProjectionWeights pw = projection_weights(t, c);
  if (!extras || !extras->preload || !extras->preload->bytes) return pw;
  mbar_wait(extras->preload->bar, extras->preload->parity);
  // The weight loads are plain asm, which the compiler may move anywhere their address is
  // known: an address it learns only after the wait keeps them after it.
  const bf16* copy = opaque(reinterpret_cast<const bf16*>(smem + extras->preload->at));
  pw.first[0] = copy;
  if (pw.matrices == 2) pw.first[1] = copy + pw.span_bytes(t) / 2u;
  pw.shared = true;
  return pw;
}

// The vector a projection multiplies, as bf16 in shared memory: RMSNorm(x) with norm_w, else
// x. Every element of a normalised input is bf16-rounded, so bf16 storage is exact. x and the
// norm weights are staged together (one round trip), and the code stays short and rolled: it
// runs once per task (12 KB of SASS, against 39 KB unrolled; docs/EXPERIMENTS.md).
// A task without norm weights may stage `side_n` bf16 from `side` (a GEMV's residual rows)
// into their place in the same round trip, even when the input itself is cached.
__device__ inline const bf16* projection_input(const bf16* x, uint32_t K, const bf16* norm_w, const SpGraphParams& p,
                                               uint8_t* smem, const TileExtras* extras, const bf16* side = nullptr,
                                               uint32_t side_n = 0) {
  float* inv = reinterpret_cast<float*>(smem);
  bf16* n = reinterpret_cast<bf16*>(smem + projection_input_offset());
  bf16* w = reinterpret_cast<bf16*>(smem + projection_norm_offset(K));
  InputKey* cache = extras ? extras->input : nullptr;
  const InputKey key{x, norm_w, K, extras ? extras->wait_counter : 0u, extras ? extras->wait_target : 0u, 1u};
  const bool cached = cache && key.counter != SP_NO_COUNTER && cache->valid && cache->x == key.x &&
                      cache->norm == key.norm && cache->K == key.K && cache->counter == key.counter &&
                      cache->target == key.target;
  if (cached && !side) return n;
  if (side) stage_to_shared<Src::Data>(side, w, side_n);
  if (!cached) stage_to_shared<Src::Data>(x, n, K);
  if (norm_w) stage_to_shared<Src::Resident>(norm_w, w, K);
  cp_async_wait_all();
  __syncthreads();
  if (cached) return n;
  if (norm_w) {
    if (warp_id() == 0) {
      const float ss = warp_dot<Src::Shared, Src::Shared, 2>(n, n, K);
      if (lane_id() == 0) *inv = rms_inverse<float>(ss, K, p.rms_eps);
    }
    __syncthreads();
    const float iv = *inv;
#pragma unroll 2
    for (uint32_t k = threadIdx.x; k < K; k += blockDim.x)
      n[k] = rms_norm_element<float>(widen<float>(n[k]), iv, widen<float>(w[k]), p.norm_kind);
    __syncthreads();
  }
  if (cache && threadIdx.x == 0) *cache = key;  // every thread has read the old key above
  return n;
}

// The better of two argmax partials: `argmax_offer` applied in index order. Selection by
// (NaN, value, earlier index) is associative, so any reduction tree gives the sequential
// scan's answer. {-Inf, ~0u} is the identity.
__device__ inline ArgmaxPartial argmax_merge(ArgmaxPartial a, ArgmaxPartial b) {
  ArgmaxPartial first = a.index <= b.index ? a : b;
  const ArgmaxPartial later = a.index <= b.index ? b : a;
  argmax_offer(first, later.value, later.index);
  return first;
}

// The best of the warp's 32 partials, to every lane.
__device__ inline ArgmaxPartial warp_argmax(ArgmaxPartial best) {
  for (uint32_t off = 16; off > 0; off /= 2)
    best = argmax_merge(best, {__shfl_xor_sync(~0u, best.value, off), __shfl_xor_sync(~0u, best.index, off)});
  return best;
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
// end (R = MaxR, then 2, then 1; MaxR is 4, 2 or 1), in increasing order: a warp's rows,
// several in flight at once.
template <int MaxR, class F>
__device__ __forceinline__ void for_row_groups(uint32_t first, uint32_t end, uint32_t stride, F&& f) {
  static_assert(MaxR == 4 || MaxR == 2 || MaxR == 1);
  uint32_t r = first;
  if constexpr (MaxR == 4)
    for (; r + 3 * stride < end; r += 4 * stride) f.template operator()<4>(r);
  if constexpr (MaxR >= 2)
    for (; r + stride < end; r += 2 * stride) f.template operator()<2>(r);
  for (; r < end; r += stride) f.template operator()<1>(r);
}

// Loads in flight per lane across a group's weight rows, and the most rows (GEMV) or row pairs
// (GATE_UP) a group holds. Measured (docs/EXPERIMENTS.md): GATE_UP with 2 pairs is 7% faster than
// 4 pairs or 1; 16 loads in flight for a full group of 4 rows beat 8 by 3-4%
// on qwen3-8b; the smaller groups that end a task keep 8, since 16 there
// spill registers in the persistent kernel.
constexpr int kLoadsInFlight = 16, kSmallGroupLoads = 8;
constexpr int kGemvGroupRows = 4, kGateUpGroupRows = 2;
// 16-byte chunks a lane loads ahead per row of a group of `rows` weight rows.
__host__ __device__ constexpr int chunks_in_flight(int rows) {
  const int u = (rows >= 4 ? kLoadsInFlight : kSmallGroupLoads) / rows;
  return u < 1 ? 1 : u;
}

struct GemvOut {
  void* out;
  bool f32_out;
  const bf16* residual;   // row r's residual at residual[r - residual_row0]
  uint32_t residual_row0;
  bool residual_shared;   // staged in shared memory with the input, else read from global
};

// Lane 0: stores rows r0, r0 + stride, … (R of them) from their dots, each plus its residual
// when there is one, and offers them to the argmax. Every residual is loaded before the first
// store, so a group whose residuals are in global memory pays one L2 round trip, not R (the
// residual may alias out, but row r's residual is only read for row r, before row r is
// stored).
template <int R>
__device__ __forceinline__ void finish_gemv_rows(const GemvOut& o, uint32_t r0, uint32_t stride, const float (&dots)[R],
                                                 ArgmaxPartial& best) {
  bf16 residual[R];
  if (o.residual)
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const bf16* at = o.residual + (r0 + i * stride - o.residual_row0);
      residual[i] = o.residual_shared ? *at : load_bf16<Src::Data>(at);
    }
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const uint32_t r = r0 + i * stride;
    bf16 y = to_bf16(dots[i]);
    if (o.residual) y = to_bf16(widen<float>(residual[i]) + widen<float>(y));
    if (o.f32_out) store_bf16(static_cast<float*>(o.out)[r], y);
    else store_bf16(static_cast<bf16*>(o.out)[r], y);
    argmax_offer_logit(best, bf16_to_f32(y), r);
  }
}

// Every thread, after a GEMV task's rows: the task's argmax partial, when its flags ask for one.
__device__ inline void finish_gemv(const SpTask& t, const TileContext& c, uint8_t* smem, uint32_t flags,
                                   ArgmaxPartial best) {
  if (!(flags & 1u)) return;
  best = block_argmax(best, smem);
  if (threadIdx.x == 0) view_data<ArgmaxPartial>(c, t.operand[6])[flags >> 16] = best;
}

// A row's dot against n split as `s` says (ops/gemv.h split_row_dot): one canonical warp dot
// a piece, from the piece's first column, the pieces summed in the reference's order (every
// lane holds the same bits). One row and 2 chunks in flight at a time: only graphs that ask
// for a split take it.
__device__ __forceinline__ float split_warp_dot(const bf16* row, const bf16* n, uint32_t K, GemvSplit s) {
  const uint32_t P = K / s.pieces;
  float group = 0.0f, y = 0.0f;
  for (uint32_t j = 0; j < s.pieces; ++j) {
    const float d = warp_dot<Src::Weight, Src::Shared, 2>(row + j * P, n + j * P, P);
    const uint32_t m = j % s.group;
    group = m == 0 ? d : group + d;
    if (m + 1 == s.group) y = j < s.group ? group : y + group;
  }
  return y;
}

// kSplits: whether this build of the tile runs split dots (opcodes.h, GEMV operand 7): the
// persistent kernel's plain and MoE builds do not, since the path alone, never taken, made
// qwen3-0.6b 2.4% slower at position 1 and 6% at 4096 (docs/EXPERIMENTS.md); its two-hop
// build and the per-op kernels do. kRouters: whether it also runs ROUTER tasks (ops/moe.h
// router_rows), whose rows are a GEMV's into f32 logits, without residual, argmax or split
// (their operand 4 is the MoE parameters; the routing itself is EXPERT_GATE_UP's, so that no
// block's arrival, routing and store lies between the router's rows and the experts' rows).
template <bool kSplits, bool kRouters>
__device__ inline void run_gemv(const SpTask& t, const TileContext& c, uint8_t* smem, const TileExtras* extras) {
  const bool router = kRouters && t.op == SP_OP_ROUTER;
  const uint32_t K = c.views[t.operand[0]].cols;
  const uint32_t first_row = t.tile_begin + warp_id(), stride = warps_per_block();
  const bf16* norm_w = t.operand[2] == SP_NO_VIEW ? nullptr : view_data<const bf16>(c, t.operand[2]);
  const bf16* residual = router || t.operand[4] == SP_NO_VIEW ? nullptr : view_data<const bf16>(c, t.operand[4]);
  // The task's residual rows come with the input, off the stores' critical path, where the norm
  // weights' place is free and holds them.
  const uint32_t rows = t.tile_end - t.tile_begin;
  const bool stage_residual = residual && !norm_w && rows <= K;
  const bf16* n = projection_input(view_data<const bf16>(c, t.operand[1]), K, norm_w, *c.params, smem, extras,
                                   stage_residual ? residual + t.tile_begin : nullptr, rows);
  const ProjectionWeights w = task_weights(t, c, smem, extras);  // after the input: a preload overlaps it
  const GemvOut o{view_data<void>(c, t.operand[3]), c.views[t.operand[3]].dtype == SP_F32,
                  stage_residual ? reinterpret_cast<const bf16*>(smem + projection_norm_offset(K)) : residual,
                  stage_residual ? t.tile_begin : 0u, stage_residual};
  const uint32_t flags = router ? 0u : t.operand[5];
  // Known only after the input's barrier, so no shared load of it is moved above that.
  const uint32_t n_address = smem_address(opaque(n));

  ArgmaxPartial best = first_row < t.tile_end ? argmax_none(first_row) : ArgmaxPartial{argmax_none(0).value, ~0u};
  if constexpr (kSplits) {
    const GemvSplit split = gemv_split(router ? 0u : t.operand[7]);  // checked on the host (cuda_executor.cpp)
    if (split.pieces > 1) {
      for (uint32_t r = first_row; r < t.tile_end; r += stride) {
        const float dot[1] = {split_warp_dot(w.first[0] + size_t(r - t.tile_begin) * w.row_stride, n, K, split)};
        if (lane_id() == 0) finish_gemv_rows<1>(o, r, stride, dot, best);
      }
      return finish_gemv(t, c, smem, flags, best);
    }
  }
  for_row_groups<kGemvGroupRows>(first_row, t.tile_end, stride, [&]<int R>(uint32_t r0) {
    float dots[R];
    if (w.shared_dot()) {
      uint32_t rows[R];
      for (int i = 0; i < R; ++i) rows[i] = w.shared_row(0, r0 + i * stride - t.tile_begin);
      warp_dot_rows_shared<R>(rows, n_address, K, dots);
    } else {
      const bf16* rows[R];
      for (int i = 0; i < R; ++i) rows[i] = w.first[0] + size_t(r0 + i * stride - t.tile_begin) * w.row_stride;
      warp_dot_rows<Src::Weight, Src::Shared, R, chunks_in_flight(R)>(rows, n, K, dots);
    }
    if (lane_id() != 0) return;  // lane 0 alone finishes the rows: the residual may alias out
    finish_gemv_rows<R>(o, r0, stride, dots, best);
  });
  finish_gemv(t, c, smem, flags, best);
}

// A piece's dots of rows [tile_begin, tile_end) (W operand 0, its input operand 1) into
// partial_row, f32 (ops/gemv.h piece_dot_rows): GEMV_PIECE's first half, and PIECE_DOTS.
__device__ inline void piece_dots(const SpTask& t, const TileContext& c, uint8_t* smem, float* partial_row) {
  const SpView& W = c.views[t.operand[0]];
  const uint32_t stride = warps_per_block();
  const bf16* n = projection_input(view_data<const bf16>(c, t.operand[1]), W.cols, nullptr, *c.params, smem, nullptr);
  const bf16* first = view_data<const bf16>(c, t.operand[0]);
  for_row_groups<kGemvGroupRows>(t.tile_begin + warp_id(), t.tile_end, stride, [&]<int R>(uint32_t r0) {
    const bf16* rows[R];
    for (int i = 0; i < R; ++i) rows[i] = first + size_t(r0 + i * stride) * W.row_stride;
    float dots[R];
    warp_dot_rows<Src::Weight, Src::Shared, R, chunks_in_flight(R)>(rows, n, W.cols, dots);
    if (lane_id() == 0)
      for (int i = 0; i < R; ++i) partial_row[r0 + i * stride] = dots[i];
  });
}

// Rows [r0, r1) of the pieces' partials (row j at partials + j·ps) summed as split_row_dot sums
// them, into out = r(res + r(y)), or r(y) (ops/gemv.h piece_sum_rows): GEMV_PIECE's last
// arrival, and PIECE_SUM.
__device__ inline void piece_sum(const float* partials, size_t ps, GemvSplit split, uint32_t r0, uint32_t r1, bf16* out,
                                 const bf16* residual) {
  for (uint32_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
    bf16 y = to_bf16(split_sum<float>(split, [&](uint32_t j) { return load_data(partials + j * ps + r); }));
    if (residual) y = to_bf16(widen<float>(load_bf16<Src::Data>(residual + r)) + widen<float>(y));
    out[r] = y;
  }
}

// A GEMV piece task (tasks/opcodes.h SP_OP_GEMV_PIECE, ops/gemv.h gemv_piece_rows): each warp's
// rows' dots over the piece's columns, read from global memory (a piece's rows are not one
// span, so nothing is preloaded), into the piece's partial row; the last piece of these rows to
// count in sums every piece's dots and stores the rows, a thread a row.
__device__ inline void run_gemv_piece(const SpTask& t, const TileContext& c, uint8_t* smem) {
  const GemvPiece piece = gemv_piece(t);  // checked on the host (cuda_executor.cpp)
  float* partials = view_data<float>(c, t.operand[4]);
  const size_t ps = c.views[t.operand[4]].row_stride;
  piece_dots(t, c, smem, partials + piece.index * ps);
  if (!block_arrived_last(view_data<uint32_t>(c, t.operand[5])[piece.word], piece.split.pieces)) return;
  piece_sum(partials, ps, piece.split, t.tile_begin, t.tile_end, view_data<bf16>(c, t.operand[2]),
            t.operand[3] == SP_NO_VIEW ? nullptr : view_data<const bf16>(c, t.operand[3]));
}

// PIECE_DOTS: piece j's dots (operand 3) into partial row j of operand 2.
__device__ inline void run_piece_dots(const SpTask& t, const TileContext& c, uint8_t* smem) {
  piece_dots(t, c, smem, view_data<float>(c, t.operand[2]) + size_t(t.operand[3]) * c.views[t.operand[2]].row_stride);
}

// PIECE_SUM: the rows of the pieces' partials (operand 0) summed into operand 1, with the
// residual of operand 2 where there is one.
__device__ inline void run_piece_sum(const SpTask& t, const TileContext& c) {
  piece_sum(view_data<const float>(c, t.operand[0]), c.views[t.operand[0]].row_stride, gemv_split(t.operand[3]),
            t.tile_begin, t.tile_end, view_data<bf16>(c, t.operand[1]),
            t.operand[2] == SP_NO_VIEW ? nullptr : view_data<const bf16>(c, t.operand[2]));
}

__device__ inline void run_gate_up(const SpTask& t, const TileContext& c, uint8_t* smem, const TileExtras* extras) {
  const uint32_t K = c.views[t.operand[0]].cols, stride = warps_per_block();
  const bf16* n = projection_input(view_data<const bf16>(c, t.operand[2]), K, view_data<const bf16>(c, t.operand[3]),
                                   *c.params, smem, extras);
  const ProjectionWeights w = task_weights(t, c, smem, extras);
  bf16* act = view_data<bf16>(c, t.operand[4]);
  const uint32_t n_address = smem_address(opaque(n));  // as in run_gemv
  for_row_groups<kGateUpGroupRows>(t.tile_begin + warp_id(), t.tile_end, stride, [&]<int R>(uint32_t r0) {
    float dots[2 * R];  // gate and up of each output row
    if (w.shared_dot()) {
      uint32_t rows[2 * R];
      for (int i = 0; i < R; ++i) {
        rows[2 * i] = w.shared_row(0, r0 + i * stride - t.tile_begin);
        rows[2 * i + 1] = w.shared_row(1, r0 + i * stride - t.tile_begin);
      }
      warp_dot_rows_shared<2 * R>(rows, n_address, K, dots);
    } else {
      const bf16* rows[2 * R];
      for (int i = 0; i < R; ++i) {
        const size_t row = size_t(r0 + i * stride - t.tile_begin) * w.row_stride;
        rows[2 * i] = w.first[0] + row;
        rows[2 * i + 1] = w.first[1] + row;
      }
      warp_dot_rows<Src::Weight, Src::Shared, 2 * R, chunks_in_flight(2 * R)>(rows, n, K, dots);
    }
    if (lane_id() != 0) return;
    for (int i = 0; i < R; ++i) act[r0 + i * stride] = swiglu(rounded(dots[2 * i]), rounded(dots[2 * i + 1]));
  });
}

}  // namespace spindle::cuda
