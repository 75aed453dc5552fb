#include "megakernel/persistent_kernel.cuh"
#include "megakernel/persistent_kernels.h"

namespace spindle::cuda {

PersistentKernel plain_kernel(uint32_t min_blocks_per_sm) {
  return min_blocks_per_sm >= 2 ? persistent_kernel<2, TileBuild::kPlain> : persistent_kernel<1, TileBuild::kPlain>;
}

}  // namespace spindle::cuda
