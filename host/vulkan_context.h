// The Vulkan instance, the chosen device with the features the shaders need, and its
// compute queue. Every failing call becomes a spindle::Error naming the call and its VkResult.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>

namespace spindle::vk {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY (-2)".
std::string result_name(VkResult r);

// Throws spindle::Error("vulkan: WHAT failed: RESULT") unless r is VK_SUCCESS.
void check(VkResult r, const char* what);

// What the executor needs to know about its device.
struct DeviceTraits {
  std::string name;
  VkDriverId driver = VkDriverId(0);
  uint32_t max_shared_bytes = 0;      // maxComputeSharedMemorySize
  uint32_t max_workgroup_size = 0;    // min of maxComputeWorkGroupSize[0] and ...Invocations
  uint32_t max_workgroups = 0;        // maxComputeWorkGroupCount[0]: workgroups one dispatch may have
  uint32_t compute_units = 0;         // SMs where the driver says (NVIDIA), else 0
  uint32_t subgroup_size = 0;         // invocations of a compute subgroup
  bool cpu = false;                   // a CPU device (lavapipe)
  bool pipeline_statistics = false;   // VK_KHR_pipeline_executable_properties' pipelineExecutableInfo (enabled)
  bool sm_builtins = false;           // VK_NV_shader_sm_builtins' shaderSMBuiltins (enabled): gl_SMIDNV
  bool lavapipe() const { return driver == VK_DRIVER_ID_MESA_LLVMPIPE; }
};

class Context {
 public:
  // Device `index` in the loader's order, or the best usable one for -1 (discrete GPUs
  // first, the CPU last), with the features the shaders need and pipeline statistics where
  // the device offers them. Throws spindle::Error when there is none, or it lacks a feature.
  explicit Context(int32_t index);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  VkDevice device() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  uint32_t device_index() const { return index_; }
  const DeviceTraits& traits() const { return traits_; }

 private:
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0, index_ = 0;
  DeviceTraits traits_;
};

}  // namespace spindle::vk
