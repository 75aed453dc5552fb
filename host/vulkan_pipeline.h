// A compute pipeline from embedded SPIR-V words: its only inputs are push constants (every
// buffer is reached by device address) and specialization constants 0, 1, ... (u32). Where
// the device reports pipeline statistics, it is created to capture them.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <span>
#include <vector>

#include "host/executor.h"
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

  // The driver's statistics of each executable the pipeline compiled to (registers, spills,
  // ... as the driver names them); empty when the device does not report them.
  std::vector<PipelineStatistic> statistics() const;

 private:
  void destroy();
  VkDevice device_;
  uint32_t push_bytes_;
  bool statistics_;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace spindle::vk
