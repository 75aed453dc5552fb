#include "megakernel/device_buffer.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "megakernel/cuda_check.h"
#include "tasks/error.h"

namespace spindle::cuda {

DeviceBuffer::DeviceBuffer(uint64_t bytes, const std::string& what) : bytes_(bytes) {
  if (bytes == 0) return;
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so the process carries on
    size_t free_bytes = 0, total_bytes = 0;
    SP_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    throw Error("cuda executor: out of device memory: " + what + " needs " + std::to_string(bytes) +
                " bytes, but the device has " + std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
                " bytes free");
  }
  cuda_check(e, "cudaMalloc");
  ptr_ = static_cast<uint8_t*>(p);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);  // a destructor cannot throw; a failed free leaves nothing to do
}

}  // namespace spindle::cuda
