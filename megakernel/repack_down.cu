#include "megakernel/repack_down.h"

#include "megakernel/cuda_check.h"
#include "megakernel/device_buffer.h"

namespace spindle::cuda {
namespace {

// One thread an element of the piece-major copy.
__global__ void piece_major(const uint16_t* src, uint16_t* dst, uint32_t rows, uint32_t cols, uint32_t stride,
                            uint32_t piece) {
  const uint64_t e = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= uint64_t(rows) * cols) return;
  const uint32_t k = uint32_t(e % piece), i = uint32_t(e / piece % rows), j = uint32_t(e / piece / rows);
  dst[e] = src[uint64_t(i) * stride + uint64_t(j) * piece + k];
}

}  // namespace

void repack_piece_major(void* w, uint32_t rows, uint32_t cols, uint32_t stride, uint32_t piece) {
  const size_t bytes = (size_t(rows - 1) * stride + cols) * 2;
  DeviceBuffer copy(bytes, "the down weight's repacking copy");
  SP_CUDA(cudaMemcpy(copy.data(), w, bytes, cudaMemcpyDeviceToDevice));
  const uint64_t elements = uint64_t(rows) * cols;
  piece_major<<<uint32_t((elements + 255) / 256), 256>>>(reinterpret_cast<const uint16_t*>(copy.data()),
                                                         static_cast<uint16_t*>(w), rows, cols, stride, piece);
  cuda_check(cudaGetLastError(), "piece_major<<<>>>");
  SP_CUDA(cudaDeviceSynchronize());
}

}  // namespace spindle::cuda
