// SAMPLE tile, greedy only (the host refuses temperature > 0): the argmax over the partial
// slots, reduced by the whole block with a merge that equals the slot-order scan (every step:
// it marks logits that are not finite, ops/sample.h note_nonfinite_logits); the forced token
// while the prompt lasts, else the argmax's; then thread 0 advances the step state.
#pragma once
#include <stdint.h>

#include "megakernel/device_dot.cuh"
#include "megakernel/device_failure.cuh"
#include "megakernel/tile_projection.cuh"
#include "ops/argmax.h"
#include "ops/context.h"
#include "ops/sample.h"

namespace spindle::cuda {

__device__ inline void run_sample(const SpTask& t, const TileContext& c, uint8_t* smem, const TaskSite& site) {
  SpStepState s;
  uint32_t* words = reinterpret_cast<uint32_t*>(&s);
  for (uint32_t i = 0; i < sizeof(SpStepState) / 4; ++i) words[i] = load_data(reinterpret_cast<const uint32_t*>(c.state) + i);
  if (s.step >= c.params->max_steps) return fail_task(site, kFailStepRange, s.step, c.params->max_steps);
  const uint32_t* forced = view_data<const uint32_t>(c, t.operand[3]);
  const bool is_forced = step_is_forced(s);

  ArgmaxPartial best{argmax_none(0).value, ~0u};
  const ArgmaxPartial* partials = view_data<const ArgmaxPartial>(c, t.operand[1]);
  for (uint32_t i = threadIdx.x; i < t.operand[2]; i += blockDim.x)
    best = argmax_merge(best, {load_data(&partials[i].value), load_data(&partials[i].index)});
  best = block_argmax(warp_argmax(best), smem);
  __syncthreads();  // every thread has read the state before thread 0 advances it
  if (threadIdx.x != 0) return;
  note_nonfinite_logits(s, best);
  advance_step(s, is_forced ? load_data(forced + s.step + 1) : best.index, view_data<uint32_t>(c, t.operand[4]));
  *c.state = s;
}

}  // namespace spindle::cuda
