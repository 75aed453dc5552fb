#include "megakernel/megakernel.h"

#include "megakernel/cuda_check.h"
#include "megakernel/persistent_kernels.h"

namespace spindle::cuda {
namespace {

// The kernel's builds: the plain build with registers for 1 or 2 blocks an SM; the MoE and
// two-hop builds, 1 block an SM.
PersistentKernel kernel_build(uint32_t min_blocks_per_sm, TileBuild build) {
  if (build == TileBuild::kTwoHop) return two_hop_kernel();
  if (build == TileBuild::kMoe) return moe_kernel();
  return plain_kernel(min_blocks_per_sm);
}

}  // namespace

size_t megakernel_static_smem(uint32_t min_blocks_per_sm, TileBuild build) {
  cudaFuncAttributes attr{};
  SP_CUDA(cudaFuncGetAttributes(&attr, kernel_build(min_blocks_per_sm, build)));
  return attr.sharedSizeBytes;
}

uint32_t megakernel_blocks_per_sm(uint32_t min_blocks_per_sm, TileBuild build, size_t smem) {
  const PersistentKernel kernel = kernel_build(min_blocks_per_sm, build);
  SP_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int blocks = 0;
  SP_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kBlockThreads, smem));
  return uint32_t(blocks);
}

void launch_megakernel(const DeviceGraph& g, uint32_t min_blocks_per_sm, TileBuild build, uint32_t blocks, size_t smem,
                       const MegakernelLaunch& launch, cudaStream_t stream) {
  kernel_build(min_blocks_per_sm, build)<<<blocks, kBlockThreads, smem, stream>>>(g, launch);
  cuda_check(cudaGetLastError(), "persistent_kernel<<<>>>");
}

}  // namespace spindle::cuda
