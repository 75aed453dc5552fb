#include "megakernel/persistent_kernel.cuh"
#include "megakernel/persistent_kernels.h"

namespace spindle::cuda {

PersistentKernel two_hop_kernel() { return persistent_kernel<1, TileBuild::kTwoHop>; }

}  // namespace spindle::cuda
