// EMBED tile: columns [tile_begin, tile_end) of the embedding row of the step's token.
#pragma once
#include <stdint.h>

#include "megakernel/device_dot.cuh"
#include "megakernel/device_failure.cuh"
#include "ops/context.h"

namespace spindle::cuda {

__device__ inline void run_embed(const SpTask& t, const TileContext& c, const TaskSite& site) {
  const SpView& table = c.views[t.operand[0]];
  const uint32_t token = load_data(&c.state->token);
  if (token >= table.rows) return fail_task(site, kFailTokenRange, token, table.rows);
  const bf16* row = view_data<const bf16>(c, t.operand[0]) + size_t(token) * table.row_stride;
  bf16* out = view_data<bf16>(c, t.operand[1]);
  for (uint32_t col = t.tile_begin + threadIdx.x; col < t.tile_end; col += blockDim.x)
    out[col] = load_bf16<Src::Weight>(row + col);
}

}  // namespace spindle::cuda
