// Each build of the persistent kernel (tile_build.h), from its own translation unit
// (persistent_kernel.cuh says why).
#pragma once
#include <cstdint>

#include "megakernel/megakernel.h"

namespace spindle::cuda {

using PersistentKernel = void (*)(DeviceGraph, MegakernelLaunch);

PersistentKernel plain_kernel(uint32_t min_blocks_per_sm);  // registers for 1 or 2 blocks an SM
PersistentKernel moe_kernel();
PersistentKernel two_hop_kernel();

}  // namespace spindle::cuda
