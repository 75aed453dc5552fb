// What the device tiles are laid out for: their dynamic shared memory (the host sizes each
// launch with these functions, and the tiles carve their buffers with the same numbers) and
// their per-thread limits, which the host checks before any launch.
#pragma once
#include <stdint.h>

#include "ops/hd.h"

namespace spindle::cuda {

// At the start of every tile's shared memory: small per-task values (1/rms, per-warp
// partials, per-head softmax state).
constexpr uint32_t kTileScratchBytes = 512;

// Warps of a block (the device records fix 256 threads a block).
constexpr uint32_t kTileWarps = 8;

// ATTN_CHUNK accumulators per thread: group * head_dim <= kAttnPairsPerThread * threads.
constexpr uint32_t kAttnPairsPerThread = 8;
// ATTN_CHUNK keeps each head's running max in the scratch: at most this many q heads per kv head.
constexpr uint32_t kAttnMaxGroup = kTileScratchBytes / 4;

SP_HDI uint32_t align16(uint32_t bytes) { return (bytes + 15u) & ~15u; }

// GEMV and GATE_UP: the projection's input, normalised once per task, as K bf16 values, then
// the norm weights (K bf16).
SP_HDI uint32_t projection_input_offset() { return kTileScratchBytes; }
SP_HDI uint32_t projection_norm_offset(uint32_t K) { return kTileScratchBytes + align16(K * 2u); }
SP_HDI uint32_t projection_smem_bytes(uint32_t K) { return projection_norm_offset(K) + align16(K * 2u); }

// ATTN_CHUNK: the group's q heads (group x D bf16), then the scores of one block of
// `score_positions` positions for every q head of the group (f32), then the K and V rows of
// `kv_positions` positions (bf16; or the K, or the V, rows of twice as many).
SP_HDI uint32_t attn_q_offset() { return kTileScratchBytes; }
SP_HDI uint32_t attn_scores_offset(uint32_t group, uint32_t D) {
  return kTileScratchBytes + align16(group * D * 2u);
}
SP_HDI uint32_t attn_kv_offset(uint32_t group, uint32_t D, uint32_t score_positions) {
  return attn_scores_offset(group, D) + align16(group * score_positions * 4u);
}
SP_HDI uint32_t attn_smem_bytes(uint32_t group, uint32_t D, uint32_t score_positions, uint32_t kv_positions) {
  return attn_kv_offset(group, D, score_positions) + 2u * kv_positions * D * 2u;
}

// ATTN_MERGE, when the host enables it: the task's partial rows (f32), then one weight per
// row.
SP_HDI uint32_t merge_smem_bytes(uint32_t rows, uint32_t row_stride) {
  return kTileScratchBytes + align16(rows * row_stride * 4u) + align16(rows * 4u);
}

}  // namespace spindle::cuda
