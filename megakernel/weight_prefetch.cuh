// Sends the start of a task's weights towards L2 before the task runs: the persistent kernel
// calls it for a claimed task before waiting on its counter, so the weights are on their way
// during the wait and the tile's input normalisation. Weights never change during a launch,
// so a prefetch never reads stale data; it is only a hint.
#pragma once
#include <stdint.h>

#include "megakernel/device_records.h"
#include "ops/context.h"

namespace spindle::cuda {

// Bytes one thread's bulk-prefetch instruction covers.
constexpr uint32_t kPrefetchPiece = 4096;

// Whole 16-byte units of [p, p + bytes), split over the block's threads.
__device__ inline void prefetch_l2(const void* p, uint64_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(15);
  const uint64_t span = (bytes + (reinterpret_cast<uintptr_t>(p) - begin)) & ~uint64_t(15);
  for (uint64_t off = uint64_t(threadIdx.x) * kPrefetchPiece; off < span; off += uint64_t(blockDim.x) * kPrefetchPiece) {
    const uint32_t size = uint32_t(span - off < kPrefetchPiece ? span - off : kPrefetchPiece);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(begin + off), "r"(size) : "memory");
  }
}

// The first `budget` bytes of rows [r0, r1) of weight view `view`.
__device__ inline void prefetch_rows(const TileContext& c, uint32_t view, uint32_t r0, uint32_t r1, uint64_t budget) {
  const SpView& v = c.views[view];
  const uint64_t row_bytes = uint64_t(v.row_stride) * 2;
  const uint64_t bytes = uint64_t(r1 - r0) * row_bytes;
  prefetch_l2(view_data<const uint8_t>(c, view) + r0 * row_bytes, bytes < budget ? bytes : budget);
}

// At most `budget` bytes of the task's weight rows (split between GATE_UP's two matrices).
__device__ inline void prefetch_task_weights(const DeviceGraph& g, uint32_t task, uint32_t budget) {
  const SpTask& t = g.tasks[task];
  if (t.op == SP_OP_GEMV) {
    prefetch_rows(g.ctx, t.operand[0], t.tile_begin, t.tile_end, budget);
  } else if (t.op == SP_OP_GATE_UP) {
    prefetch_rows(g.ctx, t.operand[0], t.tile_begin, t.tile_end, budget / 2);
    prefetch_rows(g.ctx, t.operand[1], t.tile_begin, t.tile_end, budget / 2);
  }
}

}  // namespace spindle::cuda
