// QK_NORM_ROPE tile (docs/numerics.md): one warp per head. q and k heads get the per-head
// RMSNorm (1/rms from the canonical dot of the head with itself) and the rotate-half RoPE of
// their first R dims; k heads land in the K cache row of the step's position, v heads are
// copied to the V cache unchanged.
#pragma once
#include <stdint.h>

#include "megakernel/device_dot.cuh"
#include "megakernel/device_failure.cuh"
#include "ops/context.h"
#include "ops/norm.h"
#include "ops/qk_norm_rope.h"

namespace spindle::cuda {

__device__ inline void run_qk_norm_rope(const SpTask& t, const TileContext& c, const TaskSite& site) {
  const SpGraphParams& p = *c.params;
  const uint32_t position = load_data(&c.state->position);
  if (position >= p.context) return fail_task(site, kFailPositionRange, position, p.context);
  const uint32_t D = p.head_dim, Hq = p.n_heads, Hkv = p.n_kv_heads, half = p.rotary_dim / 2;
  const bf16* qkv = view_data<const bf16>(c, t.operand[0]);
  const SpView& cache = c.views[t.operand[4]];
  const SpView& rope = c.views[t.operand[6]];
  const bf16* rope_row = view_data<const bf16>(c, t.operand[6]) + size_t(position) * rope.row_stride;
  auto cache_row = [&](uint32_t view, uint32_t kv_head) {
    return view_data<bf16>(c, view) + (size_t(kv_head) * p.context + position) * cache.row_stride;
  };

  for (uint32_t h = t.tile_begin + warp_id(); h < t.tile_end; h += warps_per_block()) {
    const bf16* x = qkv + size_t(h) * D;
    if (h >= Hq + Hkv) {
      bf16* v = cache_row(t.operand[5], h - Hq - Hkv);
      for (uint32_t d = lane_id(); d < D; d += 32) v[d] = load_bf16<Src::Data>(x + d);
      continue;
    }
    const bool is_q = h < Hq;
    const bf16* w = view_data<const bf16>(c, t.operand[is_q ? 1 : 2]);
    bf16* out = is_q ? view_data<bf16>(c, t.operand[3]) + size_t(h) * D : cache_row(t.operand[4], h - Hq);
    const float inv = rms_inverse<float>(warp_dot<Src::Data, Src::Data>(x, x, D), D, p.rms_eps);
    auto normed = [&](uint32_t d) {
      return rms_norm_element<float>(widen<float>(load_bf16<Src::Data>(x + d)), inv,
                                     widen<float>(load_bf16<Src::Resident>(w + d)), p.norm_kind);
    };
    for (uint32_t i = lane_id(); i < half; i += 32)
      rope_pair<float>(widen<float>(normed(i)), widen<float>(normed(i + half)),
                       widen<float>(load_bf16<Src::Resident>(rope_row + i)),
                       widen<float>(load_bf16<Src::Resident>(rope_row + half + i)), out[i], out[i + half]);
    for (uint32_t d = 2 * half + lane_id(); d < D; d += 32) out[d] = normed(d);
  }
}

}  // namespace spindle::cuda
