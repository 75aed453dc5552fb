#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "megakernel/cuda_check.h"
#include "megakernel/cuda_executor.h"
#include "megakernel/cuda_handles.h"
#include "megakernel/device_buffer.h"

namespace spindle {

double measure_copy_bandwidth_gbs(size_t bytes) {
  constexpr int kWarmups = 2, kRuns = 7;
  cuda::DeviceBuffer src(bytes, "the bandwidth probe's source"), dst(bytes, "the bandwidth probe's destination");
  SP_CUDA(cudaMemset(src.data(), 1, bytes));  // not zeros: a copy of zeros can run faster
  const cuda::Stream stream = cuda::make_stream();
  const cuda::Event start = cuda::make_event(), stop = cuda::make_event();
  for (int i = 0; i < kWarmups; ++i)
    SP_CUDA(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream.get()));
  std::vector<float> ms(kRuns);
  for (float& t : ms) {
    SP_CUDA(cudaEventRecord(start.get(), stream.get()));
    SP_CUDA(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream.get()));
    SP_CUDA(cudaEventRecord(stop.get(), stream.get()));
    SP_CUDA(cudaEventSynchronize(stop.get()));
    SP_CUDA(cudaEventElapsedTime(&t, start.get(), stop.get()));
  }
  std::nth_element(ms.begin(), ms.begin() + kRuns / 2, ms.end());
  return 2.0 * double(bytes) / (double(ms[kRuns / 2]) * 1e-3) / 1e9;
}

}  // namespace spindle
