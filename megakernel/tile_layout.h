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

// GEMV and GATE_UP: the projection's input, normalised once per task, as K bf16 values.
SP_HDI uint32_t projection_smem_bytes(uint32_t K) { return kTileScratchBytes + align16(K * 2u); }

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

// The weight stream of the persistent kernel: GEMV and GATE_UP weights flow through a ring of
// stages in shared memory, filled by the bulk copy engine ahead of the tiles that read them.
// A stage holds, for a block of rows (8 per group, one per warp; GATE_UP: the gate and the up
// row of each), the same segment [e0, e0 + len) of each row: row-unit q (= row * units + u) at
// byte q * seg * 2. Long rows take several segments (one group a stage); short rows put
// several groups in a stage.
constexpr uint32_t kStreamStageBytes = 32768;
constexpr uint32_t kStreamMaxStages = 8;
constexpr uint32_t kDotBlockElems = 256;  // ops/dot.h's kDotBlock: segments start on one

struct StreamGeom {
  uint32_t packed;  // one segment per row of exactly K elements: row-unit (row, u) at slot
                    // u * gps * 8 + row (each unit's rows back to back, so contiguous rows
                    // arrive in one copy per unit); else at slot row * units + u
  uint32_t units;   // weight rows per output row: 1 (GEMV) or 2 (GATE_UP)
  uint32_t K;       // elements per row
  uint32_t rows;    // output rows of the task
  uint32_t seg;     // elements a row-unit may hold in a stage (a multiple of 256)
  uint32_t nseg;    // segments per row
  uint32_t gps;     // groups of 8 rows per stage (1 when nseg > 1)
  uint32_t stages;  // stages of the task
};

SP_HDI uint32_t stream_seg_max(uint32_t units) { return kStreamStageBytes / (2u * kTileWarps * units); }

SP_HDI StreamGeom stream_geom(uint32_t K, uint32_t rows, uint32_t units) {
  StreamGeom s{};
  s.units = units;
  s.K = K;
  s.rows = rows;
  if (K == 0 || rows == 0) return s;
  const uint32_t seg_max = stream_seg_max(units);
  s.nseg = (K + seg_max - 1) / seg_max;
  const uint32_t per = (K + s.nseg - 1) / s.nseg;
  s.seg = (per + kDotBlockElems - 1) / kDotBlockElems * kDotBlockElems;
  s.gps = s.nseg == 1 ? kStreamStageBytes / (2u * kTileWarps * units * s.seg) : 1u;
  const uint32_t groups = (rows + kTileWarps - 1) / kTileWarps;
  s.stages = (groups + s.gps - 1) / s.gps * s.nseg;
  s.packed = s.nseg == 1 && s.seg == K;
  return s;
}

// Where row-unit (row, u) of a stage starts, in elements from the stage's first byte.
SP_HDI uint32_t stream_slot(const StreamGeom& s, uint32_t row, uint32_t u) {
  return (s.packed ? u * s.gps * kTileWarps + row : row * s.units + u) * s.seg;
}

// Stage i of a task: its first row (within the task), rows, and segment.
struct StreamStage {
  uint32_t row_first, rows_in, e0, len;
};
SP_HDI StreamStage stream_stage(const StreamGeom& s, uint32_t i) {
  const uint32_t gb = i / s.nseg, seg = i % s.nseg;
  StreamStage t{};
  t.row_first = gb * s.gps * kTileWarps;
  const uint32_t left = s.rows - t.row_first;
  t.rows_in = left < s.gps * kTileWarps ? left : s.gps * kTileWarps;
  t.e0 = seg * s.seg;
  t.len = (t.e0 + s.seg < s.K ? t.e0 + s.seg : s.K) - t.e0;
  return t;
}

}  // namespace spindle::cuda
