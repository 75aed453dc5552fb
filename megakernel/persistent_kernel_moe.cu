#include "megakernel/persistent_kernel.cuh"
#include "megakernel/persistent_kernels.h"

namespace spindle::cuda {

PersistentKernel moe_kernel() { return persistent_kernel<1, TileBuild::kMoe>; }

}  // namespace spindle::cuda
