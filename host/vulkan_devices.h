// The Vulkan executor's entry points, free of Vulkan types so the rest of the host builds
// the same with or without Vulkan (vulkan_unavailable.cpp answers for a build without it).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host/executor.h"

namespace spindle {

struct VulkanDeviceInfo {
  uint32_t index = 0;     // what --device takes
  std::string name;       // "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string type;       // discrete-gpu, integrated-gpu, virtual-gpu, cpu, other
  std::string driver;     // "llvmpipe: Mesa 22.3.6 (LLVM 15.0.6)"
  std::string api;        // "1.3.230"
  std::string unusable;   // empty when the executor can run on it, else why not
};

// The devices the Vulkan loader finds, in its order. Throws spindle::Error when this build
// has no Vulkan executor, or when no Vulkan instance can be made (naming the VkResult).
std::vector<VulkanDeviceInfo> list_vulkan_devices();

// The device an executor with ExecutorOptions::device = `device` runs on (-1: the best
// usable one). Throws spindle::Error as list_vulkan_devices does, and when there is no such
// usable device.
VulkanDeviceInfo chosen_vulkan_device(int32_t device);

// That device's copy bandwidth in GB/s, bytes read + written per second as the CUDA
// executor's measure_copy_bandwidth_gbs counts them: the median of 7 compute-shader copies
// (shaders/copy.comp) of `bytes`, rounded down to 16, between two device-local buffers, timed
// with timestamp queries, after 2 warm-ups.
// Throws spindle::Error when bytes is under 16 or more than one allocation may hold, when the
// device has no timestamps on its compute queue, or memory runs out.
double measure_vulkan_copy_bandwidth_gbs(int32_t device, uint64_t bytes);

// Throws spindle::Error when the build has no Vulkan executor, no usable device is found (or
// opt.device names none), or the graph needs what the shaders do not support.
std::unique_ptr<Executor> make_vulkan_executor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt);

}  // namespace spindle
