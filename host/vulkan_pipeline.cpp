#include "host/vulkan_pipeline.h"

namespace spindle::vk {

ComputePipeline::ComputePipeline(const Context& ctx, std::span<const uint32_t> spirv, uint32_t push_bytes,
                                 const std::vector<uint32_t>& specialization)
    : device_(ctx.device()), push_bytes_(push_bytes) {
  try {
    VkShaderModuleCreateInfo module{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module.codeSize = spirv.size_bytes();
    module.pCode = spirv.data();
    check(vkCreateShaderModule(device_, &module, nullptr, &module_), "vkCreateShaderModule");

    const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout.pushConstantRangeCount = 1;
    layout.pPushConstantRanges = &range;
    check(vkCreatePipelineLayout(device_, &layout, nullptr, &layout_), "vkCreatePipelineLayout");

    std::vector<VkSpecializationMapEntry> entries;
    for (uint32_t i = 0; i < specialization.size(); ++i) entries.push_back({i, i * 4, 4});
    const VkSpecializationInfo spec{uint32_t(entries.size()), entries.data(), specialization.size() * 4,
                                    specialization.data()};
    VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module_;
    info.stage.pName = "main";
    info.stage.pSpecializationInfo = &spec;
    info.layout = layout_;
    check(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &pipeline_), "vkCreateComputePipelines");
  } catch (...) {
    destroy();
    throw;
  }
}

ComputePipeline::~ComputePipeline() { destroy(); }

void ComputePipeline::destroy() {
  if (pipeline_) vkDestroyPipeline(device_, pipeline_, nullptr);
  if (layout_) vkDestroyPipelineLayout(device_, layout_, nullptr);
  if (module_) vkDestroyShaderModule(device_, module_, nullptr);
  pipeline_ = VK_NULL_HANDLE;
  layout_ = VK_NULL_HANDLE;
  module_ = VK_NULL_HANDLE;
}

void ComputePipeline::dispatch(VkCommandBuffer cmd, const void* push, uint32_t groups) const {
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  vkCmdPushConstants(cmd, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes_, push);
  vkCmdDispatch(cmd, groups, 1, 1);
}

}  // namespace spindle::vk
