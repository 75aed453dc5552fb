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

// ATTN_CHUNK accumulators per thread: group * head_dim <= kAttnPairsPerThread * threads.
constexpr uint32_t kAttnPairsPerThread = 8;
// ATTN_CHUNK keeps each head's running max in the scratch: at most this many q heads per kv head.
constexpr uint32_t kAttnMaxGroup = kTileScratchBytes / 4;

SP_HDI uint32_t align16(uint32_t bytes) { return (bytes + 15u) & ~15u; }

// GEMV and GATE_UP: the projection's input, normalised once per task, as K bf16 values.
SP_HDI uint32_t projection_smem_bytes(uint32_t K) { return kTileScratchBytes + align16(K * 2u); }

// ATTN_CHUNK: the group's q heads (group x D bf16), then the scores of one tile of
// `positions` positions for every q head of the group (f32).
SP_HDI uint32_t attn_q_offset() { return kTileScratchBytes; }
SP_HDI uint32_t attn_scores_offset(uint32_t group, uint32_t D) {
  return kTileScratchBytes + align16(group * D * 2u);
}
SP_HDI uint32_t attn_smem_bytes(uint32_t group, uint32_t D, uint32_t positions) {
  return attn_scores_offset(group, D) + group * positions * 4u;
}

}  // namespace spindle::cuda
