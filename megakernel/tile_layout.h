// What the device tiles are laid out for: their dynamic shared memory (the host sizes each
// launch with these functions, and the tiles carve their buffers with the same numbers) and
// their per-thread limits, which the host checks before any launch.
#pragma once
#include <stdint.h>

#include "ops/dot.h"
#include "tasks/host_device.h"

namespace spindle::cuda {

// At the start of every tile's shared memory: small per-task values (1/rms, per-warp
// partials, per-head softmax state).
constexpr uint32_t kTileScratchBytes = 512;

// ATTENTION accumulators per thread: group * head_dim <= kAttnPairsPerThread * threads.
constexpr uint32_t kAttnPairsPerThread = 8;
// ATTENTION keeps each head's running max, and the merge each head's max, in the scratch: at
// most this many q heads per kv head.
constexpr uint32_t kAttnMaxGroup = kTileScratchBytes / 4;

SP_HDI uint32_t align16(uint32_t bytes) { return (bytes + 15u) & ~15u; }

// Chunks a lane of warp_dot_rows_shared (device_dot.cuh) loads per row in a round by default;
// n must then be a multiple of kSharedDotSpan elements.
constexpr int kSharedDotChunks = 4;
constexpr uint32_t kSharedDotSpan = kSharedDotChunks * kDotBlock;

// A weight ring's slot (weight_ring.cuh): one bulk copy, 16 KB (docs/two-hop-layer.md: copies
// of 16 KB keep up where 2-KB ones do not).
constexpr uint32_t kRingChunkBytes = 16384;

// GEMV and GATE_UP: the projection's input, normalised once per task, as K bf16 values, then
// the norm weights (K bf16).
SP_HDI uint32_t projection_input_offset() { return kTileScratchBytes; }
SP_HDI uint32_t projection_norm_offset(uint32_t K) { return kTileScratchBytes + align16(K * 2u); }
SP_HDI uint32_t projection_smem_bytes(uint32_t K) { return projection_norm_offset(K) + align16(K * 2u); }
// MLP: the normalised hidden state as a projection's input, then a member's activations (P bf16).
SP_HDI uint32_t mlp_act_offset(uint32_t H) { return projection_smem_bytes(H); }
SP_HDI uint32_t mlp_smem_bytes(uint32_t H, uint32_t piece) { return mlp_act_offset(H) + align16(piece * 2u); }
// EXPERT_GATE_UP: a projection's input, then the k slots of the routing, the E router logits
// (f32) it routes from and the candidates of its choice (tile_moe.cuh route_places: u64, the
// first min(k, 32) of each group of 32 experts).
SP_HDI uint32_t route_group_candidates(uint32_t slots) { return slots < 32u ? slots : 32u; }
SP_HDI uint32_t expert_gate_up_logits_offset(uint32_t K, uint32_t slots) {
  return projection_smem_bytes(K) + align16(slots * 8u);
}
SP_HDI uint32_t expert_gate_up_candidates_offset(uint32_t K, uint32_t slots, uint32_t experts) {
  return expert_gate_up_logits_offset(K, slots) + align16(experts * 4u);
}
SP_HDI uint64_t expert_gate_up_smem_bytes(uint32_t K, uint32_t slots, uint32_t experts) {
  return expert_gate_up_candidates_offset(K, slots, experts) +
         (experts + 31u) / 32u * route_group_candidates(slots) * 8u;
}
// EXPERT_DOWN_PIECE and EXPERT_DOWN_SUM, which route the token themselves: the k slots and
// their weights, the E router logits (f32) and the candidates of the choice (as
// EXPERT_GATE_UP's), then the rows the tile stages: the k slots' activations of the piece
// (EXPERT_DOWN_PIECE, P bf16 each from a 16-byte boundary) or the shared expert's (EXPERT_DOWN_SUM
// with the shared expert's down rows, Is bf16).
SP_HDI uint32_t routed_logits_offset(uint32_t slots) { return kTileScratchBytes + align16(slots * 16u); }
SP_HDI uint32_t routed_candidates_offset(uint32_t slots, uint32_t experts) {
  return routed_logits_offset(slots) + align16(experts * 4u);
}
SP_HDI uint32_t routed_rows_offset(uint32_t slots, uint32_t experts) {
  return routed_candidates_offset(slots, experts) + align16((experts + 31u) / 32u * route_group_candidates(slots) * 8u);
}
// EXPERT_DOWN: the k slots of the routing, their activations (bf16, each row from a 16-byte
// boundary), the shared expert's (Is bf16; none for EXPERT_DOWN), then the task's `rows` rows
// of the residual it adds to (bf16).
SP_HDI uint32_t expert_act_stride(uint32_t Im) { return align16(Im * 2u) / 2u; }
SP_HDI uint32_t expert_down_act_offset(uint32_t slots) { return kTileScratchBytes + align16(slots * 8u); }
SP_HDI uint32_t expert_down_shared_act_offset(uint32_t slots, uint32_t Im) {
  return expert_down_act_offset(slots) + slots * expert_act_stride(Im) * 2u;
}
SP_HDI uint32_t expert_down_residual_offset(uint32_t slots, uint32_t Im, uint32_t Is) {
  return expert_down_shared_act_offset(slots, Im) + align16(Is * 2u);
}
SP_HDI uint64_t expert_down_smem_bytes(uint32_t slots, uint32_t Im, uint32_t Is, uint32_t rows) {
  return expert_down_residual_offset(slots, Im, Is) + uint64_t(align16(rows * 2u));
}
// GDN: β, the decay and two inverses in the scratch, then q̂, k̂ and v (f32) and the head's
// output (bf16), kGdnMaxHeadDim each: the key and value head sizes the tile takes (a lane holds
// one canonical run of 8 of a key row, ops/dot.h).
constexpr uint32_t kGdnMaxHeadDim = 256;
SP_HDI uint32_t gdn_q_offset() { return kTileScratchBytes; }
SP_HDI uint32_t gdn_k_offset() { return gdn_q_offset() + kGdnMaxHeadDim * 4u; }
SP_HDI uint32_t gdn_v_offset() { return gdn_k_offset() + kGdnMaxHeadDim * 4u; }
SP_HDI uint32_t gdn_o_offset() { return gdn_v_offset() + kGdnMaxHeadDim * 4u; }
SP_HDI uint32_t gdn_smem_bytes() { return gdn_o_offset() + kGdnMaxHeadDim * 2u; }
// The persistent kernel's copy of a projection task's weight rows (GATE_UP: the gate rows, then
// the up rows), after the input, from a 128-byte boundary.
SP_HDI uint32_t projection_preload_offset(uint32_t K) { return (projection_smem_bytes(K) + 127u) & ~127u; }
// One matrix's rows there: from the first row's start to the last row's end (row i of the
// task at i * row_stride, as in global memory).
SP_HDI uint64_t preload_span_bytes(uint32_t rows, uint32_t cols, uint32_t row_stride) {
  return (uint64_t(rows - 1u) * row_stride + cols) * 2u;
}
// Where the preload of `matrices` such spans (one after the other from
// projection_preload_offset) ends: 0 when the copy engine cannot take them (a span not a
// multiple of 16 bytes, rows not 16-byte aligned to one another), they take more than `budget`
// bytes, or they end past `limit`. The host sizes the launch's shared memory with it, and the
// persistent kernel starts only the copies it allows.
SP_HDI uint64_t preload_end_bytes(uint32_t matrices, uint32_t rows, uint32_t cols, uint32_t row_stride,
                                  uint64_t budget, uint64_t limit) {
  const uint64_t span = preload_span_bytes(rows, cols, row_stride), total = matrices * span;
  const uint64_t end = projection_preload_offset(cols) + total;
  return span % 16u || row_stride % 8u || total > budget || end > limit ? 0 : end;
}

// The persistent kernel's copy of an MLP member's weights, from a 128-byte boundary after that:
// its gate rows, its up rows (each from the first row's start to the last row's end), then its
// piece of the down weight repacked piece-major ([H][P], megakernel/repack_down.h).
SP_HDI uint32_t mlp_preload_offset(uint32_t H, uint32_t piece) { return (mlp_smem_bytes(H, piece) + 127u) & ~127u; }
// Where that copy ends: 0 when it cannot be made (spans not whole 16-byte pieces) or ends past
// `limit`. Unlike a projection's, its size is not limited otherwise: a member's weights are
// copied whatever their size when shared memory has room.
SP_HDI uint64_t mlp_preload_end(uint32_t H, uint32_t piece, uint32_t gu_stride, uint64_t limit) {
  const uint64_t span = preload_span_bytes(piece, H, gu_stride), down = uint64_t(H) * piece * 2u;
  const uint64_t end = mlp_preload_offset(H, piece) + 2u * span + down;
  return span % 16u || down % 16u || gu_stride % 8u || end > limit ? 0 : end;
}

// The merge: per head, room for its non-empty chunks' partial rows (f32) staged from an
// address rounded down to 16 bytes (3 floats more), then one weight per row.
SP_HDI uint32_t merge_head_floats(uint32_t chunks, uint32_t row_stride) { return (chunks * row_stride + 3u + 3u) & ~3u; }
SP_HDI uint32_t merge_smem_bytes(uint32_t heads, uint32_t chunks, uint32_t row_stride) {
  return kTileScratchBytes + heads * merge_head_floats(chunks, row_stride) * 4u + align16(heads * chunks * 4u);
}

// ATTENTION: the group's q heads (group x D bf16, normalised and rotated in place), then the
// scores of one block of `score_positions` positions for every q head of the group (f32),
// then the K and V rows of `kv_positions` positions (bf16; or the K, or the V, rows of twice
// as many), then the constants (q_norm, k_norm, the RoPE row) and the new k and v heads. The
// group's merge, in the last tile, reuses the space after the scratch.
SP_HDI uint32_t attn_q_offset() { return kTileScratchBytes; }
SP_HDI uint32_t attn_scores_offset(uint32_t group, uint32_t D) {
  return kTileScratchBytes + align16(group * D * 2u);
}
SP_HDI uint32_t attn_kv_offset(uint32_t group, uint32_t D, uint32_t score_positions) {
  return attn_scores_offset(group, D) + align16(group * score_positions * 4u);
}
SP_HDI uint32_t attn_consts_offset(uint32_t group, uint32_t D, uint32_t score_positions, uint32_t kv_positions) {
  return attn_kv_offset(group, D, score_positions) + align16(2u * kv_positions * D * 2u);
}
// Where each constant starts in that area, in bf16 elements, every one 16-byte aligned.
struct AttnConsts {
  uint32_t q_norm, k_norm, rope, k_new, v_new, end;
};
SP_HDI AttnConsts attn_consts(uint32_t D, uint32_t rotary_dim) {
  const uint32_t d = align16(D * 2u) / 2u, r = align16(rotary_dim * 2u) / 2u;
  return {0u, d, 2u * d, 2u * d + r, 3u * d + r, 4u * d + r};
}
SP_HDI uint32_t attn_smem_bytes(uint32_t group, uint32_t D, uint32_t rotary_dim, uint32_t score_positions,
                                uint32_t kv_positions, uint32_t chunks, uint32_t partial_stride) {
  const uint32_t attention =
      attn_consts_offset(group, D, score_positions, kv_positions) + attn_consts(D, rotary_dim).end * 2u;
  const uint32_t merge = merge_smem_bytes(group, chunks, partial_stride);
  return attention > merge ? attention : merge;
}

}  // namespace spindle::cuda
