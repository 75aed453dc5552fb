// Synthetic weights generated on the device: one grid-stride kernel per tensor of the plan,
// each thread writing 8 bf16 slots (16 bytes) of the arena at a time. Tensors start 64-byte
// aligned and their spans end so, so every store is a whole aligned 16-byte one; slots past a
// tensor's last element are its zero padding. The values come from synth::value, the same
// code the host runs, so the bytes are the host's (tests/cuda_synthetic.cpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "host/synthetic.h"
#include "host/synthetic_values.h"
#include "megakernel/cuda_check.h"
#include "megakernel/device_model.h"
#include "tasks/error.h"

namespace spindle::cuda {
namespace {

constexpr uint32_t kThreads = 256;
constexpr uint32_t kSlotsPerThread = 8;  // bf16 slots in one 16-byte store

__global__ void __launch_bounds__(kThreads)
    fill_tensor(uint4* out, uint64_t groups, uint64_t seed, uint64_t key, float scale, float offset,
                uint64_t elements) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t g = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) {
    const uint64_t first = g * kSlotsPerThread;
    uint32_t word[4];
#pragma unroll
    for (uint32_t k = 0; k < 4; ++k) {
      const uint64_t i = first + 2 * k;
      const uint32_t lo = i < elements ? synth::value(seed, key, i, scale, offset) : 0u;
      const uint32_t hi = i + 1 < elements ? synth::value(seed, key, i + 1, scale, offset) : 0u;
      word[k] = lo | (hi << 16);  // little-endian: slot i at the lower address
    }
    out[g] = make_uint4(word[0], word[1], word[2], word[3]);
  }
}

}  // namespace

void generate_synthetic(const SyntheticPlan& plan, uint8_t* arena) {
  int device = 0, sms = 0;
  SP_CUDA(cudaGetDevice(&device));
  SP_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const uint64_t max_blocks = uint64_t(sms) * 16;
  if (reinterpret_cast<uintptr_t>(arena) % 16)
    throw Error(plan.source + ": the device arena is not 16-byte aligned");
  for (const SyntheticTensor& t : plan.tensors) {
    if (t.offset % 16 || t.span % kSlotsPerThread || t.offset + t.span * sizeof(bf16) > plan.arena_bytes)
      throw Error(plan.source + ": tensor '" + t.name + "' is not laid out in whole 16-byte groups");
    const uint64_t groups = t.span / kSlotsPerThread;
    if (groups == 0) continue;
    const uint32_t blocks = uint32_t(std::min(max_blocks, (groups + kThreads - 1) / kThreads));
    fill_tensor<<<blocks, kThreads>>>(reinterpret_cast<uint4*>(arena + t.offset), groups, plan.seed, t.key,
                                      t.init.scale, t.init.offset, t.elements);
    SP_CUDA(cudaGetLastError());
  }
  SP_CUDA(cudaDeviceSynchronize());
}

}  // namespace spindle::cuda
