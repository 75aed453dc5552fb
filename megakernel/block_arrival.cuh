// The last-arrival count of a block's tile (ops/arrivals.h arrive_last, on the device): the
// last of a step's tiles of a group combines their partials in a fixed order, whoever it is
// (attention's merge, the MLP gangs' sum).
#pragma once
#include <stdint.h>

#include "megakernel/device_atomic.cuh"

namespace spindle::cuda {

// Every thread: counts the block's `mine` tiles in on `word` after every thread's writes (thread
// 0's device-scope acquire-release add, the threadFenceReduction pattern); true, in every thread,
// for the block that brings it to the step's `tiles`, which resets the word and sees every other
// tile's writes.
__device__ __forceinline__ bool block_arrived_last(uint32_t& word, uint32_t tiles, uint32_t mine = 1u) {
  __shared__ uint32_t s_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    DeviceAtomic count(word);
    s_last = count.fetch_add(mine, kAcqRel) + mine == tiles;
    if (s_last) count.store(0u, kRelaxed);
  }
  __syncthreads();
  return s_last;
}

}  // namespace spindle::cuda
