// What the persistent kernel lends the tiles beside their task and context: the block's cached
// projection input, its weight preload and the step's position. The per-op kernels lend nothing.
#pragma once
#include <stdint.h>

namespace spindle::cuda {

// Which normalised input the block's shared memory holds (persistent kernel): a task whose
// input is the same vector, read after the same wait, skips its normalisation.
struct InputKey {
  const void* x;
  const void* norm;
  uint32_t K, counter, target, valid;
};

// The persistent kernel's copy of a task's weights into shared memory (StagedTask::copy),
// started before the task's wait so that the HBM round trips overlap the wait and the input's
// normalisation (docs/EXPERIMENTS.md).
struct WeightPreload {
  uint32_t bytes;   // started for the task; 0: its tile reads global memory
  uint32_t at;      // where in the dynamic shared memory the copy lies
  uint32_t bar;     // shared address of the mbarrier the copies complete on
  uint32_t parity;  // of the barrier's phase those copies complete
};

// TileExtras::position when the step state holds the only copy of the step's position.
constexpr uint32_t kPositionFromState = ~0u;

// What the persistent kernel lends the tiles (the per-op kernels lend nothing).
struct TileExtras {
  InputKey* input;       // the block's cached input
  uint32_t wait_counter, wait_target;
  const WeightPreload* preload;
  uint32_t position;     // the step's, from the launch, or kPositionFromState
};

}  // namespace spindle::cuda
