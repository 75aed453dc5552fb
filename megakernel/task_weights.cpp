#include "megakernel/task_weights.h"

#include "megakernel/tile_layout.h"
#include "tasks/opcodes.h"

namespace spindle::cuda {

std::vector<WeightSpan> task_weight_spans(const Graph& g, const SpTask& t) {
  std::vector<WeightSpan> spans;
  if (t.tile_end <= t.tile_begin) return spans;
  const uint32_t rows = t.tile_end - t.tile_begin;
  // A piece's rows are its columns of whole rows: the L2 prefetch fetches the rows whole.
  const uint32_t matrices = t.op == SP_OP_MLP ? 2u : t.op == SP_OP_GEMV_PIECE ? 1u : sp_projection_matrices(t.op);
  for (uint32_t m = 0; m < matrices; ++m) {
    const SpView& W = g.views[t.operand[m]];
    const uint64_t first = sp_view_offset(W) + uint64_t(t.tile_begin) * W.row_stride * 2u;
    spans.push_back({W.arena, first, first + preload_span_bytes(rows, W.cols, W.row_stride)});
  }
  if (t.op == SP_OP_MLP) {
    const SpView& Wd = g.views[t.operand[2]];
    const uint64_t block = uint64_t(Wd.rows) * rows * 2u;
    const uint64_t first = sp_view_offset(Wd) + uint64_t(t.tile_begin / rows) * block;
    spans.push_back({Wd.arena, first, first + block});
  }
  return spans;
}

}  // namespace spindle::cuda
