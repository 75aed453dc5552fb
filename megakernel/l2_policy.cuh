// L2 eviction policies for the cache hints of loads and bulk copies (createpolicy).
#pragma once
#include <stdint.h>

namespace spindle::cuda {

// Kept over normal lines: small read-only data every block reads at every layer or step.
__device__ __forceinline__ uint64_t l2_evict_last() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// Evicted before normal lines: weights, which a step streams through the L2 once (1.2 GB for
// qwen3-0.6b against a 60 MB L2), so they push out neither the activations, the KV rows nor
// the later stages' weights asked of the L2 ahead (docs/EXPERIMENTS.md).
__device__ __forceinline__ uint64_t l2_evict_first() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

}  // namespace spindle::cuda
