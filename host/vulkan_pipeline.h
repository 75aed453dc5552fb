// A compute pipeline from embedded SPIR-V words: its only inputs are push constants (every
// buffer is reached by device address) and specialization constants 0, 1, ... (u32).
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <span>
#include <vector>

#include "host/vulkan_context.h"

namespace spindle::vk {

class ComputePipeline {
 public:
  ComputePipeline(const Context& ctx, std::span<const uint32_t> spirv, uint32_t push_bytes,
                  const std::vector<uint32_t>& specialization);
  ~ComputePipeline();
  ComputePipeline(const ComputePipeline&) = delete;
  ComputePipeline& operator=(const ComputePipeline&) = delete;

  // Binds the pipeline, pushes `push` (push_bytes) and dispatches `groups` workgroups.
  void dispatch(VkCommandBuffer cmd, const void* push, uint32_t groups) const;

 private:
  void destroy();
  VkDevice device_;
  uint32_t push_bytes_;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace spindle::vk
