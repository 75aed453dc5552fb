#include "host/cli/ceiling.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "host/vulkan_devices.h"
#ifdef SPINDLE_HAVE_CUDA
#include "megakernel/cuda_executor.h"
#endif

namespace spindle::cli {
namespace {

// Host memcpy bandwidth (bytes read + written per second, GB/s): the CPU executors' ceiling.
double host_copy_bandwidth_gbs(size_t bytes) {
  std::vector<uint8_t> src(bytes, 1), dst(bytes);
  std::vector<double> s;
  for (int i = 0; i < 6; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  s.erase(s.begin());  // warm-up: the first pass also faults the pages in
  return 2.0 * bytes / median(s) / 1e9;
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Ceiling measure_ceiling(const ExecutorOptions& o, double copy_gib) {
  const size_t bytes = size_t(copy_gib * double(1ull << 30)), small = std::min<size_t>(bytes, size_t(1) << 30);
#ifdef SPINDLE_HAVE_CUDA
  if (o.kind == ExecutorKind::Cuda) return {measure_copy_bandwidth_gbs(bytes), "device-to-device copy"};
#endif
  if (o.kind == ExecutorKind::Vulkan && chosen_vulkan_device(o.device).type != "cpu")
    return {measure_vulkan_copy_bandwidth_gbs(o.device, small), "device-to-device copy"};
  return {host_copy_bandwidth_gbs(small), "host memcpy"};
}

}  // namespace spindle::cli
