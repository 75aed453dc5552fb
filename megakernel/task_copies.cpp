#include "megakernel/task_copies.h"

#include <vector>

#include "megakernel/task_weights.h"
#include "megakernel/tile_layout.h"
#include "tasks/gang.h"
#include "tasks/opcodes.h"

namespace spindle::cuda {

TaskCopy task_copy(const Graph& g, const SpTask& t, const CopyLimits& limits) {
  const TaskCopy none{};
  if (!limits.projection_bytes || t.tile_end <= t.tile_begin) return none;
  const uint32_t rows = t.tile_end - t.tile_begin;
  uint64_t at = 0, end = 0;
  if (t.op == SP_OP_MLP) {
    if (!limits.mlp_members || sp_gang_width(t) < 2) return none;  // as the tile reads it (tile_mlp.cuh)
    const uint32_t H = g.views[t.operand[2]].rows;
    at = mlp_preload_offset(H, rows);
    end = mlp_preload_end(H, rows, g.views[t.operand[0]].row_stride, limits.smem);
  } else if (const uint32_t matrices = sp_projection_matrices(t.op)) {
    const SpView& W = g.views[t.operand[0]];
    at = projection_preload_offset(W.cols);
    end = preload_end_bytes(matrices, rows, W.cols, W.row_stride, limits.projection_bytes, limits.smem);
  }
  if (!end) return none;
  const std::vector<WeightSpan> spans = task_weight_spans(g, t);
  TaskCopy c{uint32_t(end - at), uint32_t(at), uint32_t(spans.size()), {}};
  uint64_t spanned = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const WeightSpan& s = spans[i];
    if (s.arena < SP_ARENA_WEIGHTS0 || s.begin % 16u) return none;
    c.span[i] = {s.arena, uint32_t(s.end - s.begin), s.begin};
    spanned += s.end - s.begin;
  }
  // The mbarrier expects c.bytes: spans of another size (gate and up rows of different
  // strides, which no tile reads right either) would hang the block or overrun the copy.
  return spanned == c.bytes ? c : none;
}

}  // namespace spindle::cuda
