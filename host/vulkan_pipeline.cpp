#include "host/vulkan_pipeline.h"

#include <cstdio>

namespace spindle::vk {
namespace {

std::string statistic_value(const VkPipelineExecutableStatisticKHR& s) {
  switch (s.format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: return s.value.b32 ? "true" : "false";
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: return std::to_string(s.value.i64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: return std::to_string(s.value.u64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", s.value.f64);
      return buf;
    }
    default: return "?";
  }
}

// The two-call idiom of Vulkan's queries: the count, then the elements (each of type sType).
template <class T, class Query>
std::vector<T> query_all(VkStructureType type, Query query, const char* what) {
  uint32_t n = 0;
  check(query(&n, nullptr), what);
  std::vector<T> out(n, T{type});
  check(query(&n, out.data()), what);
  out.resize(n);
  return out;
}

}  // namespace

ComputePipeline::ComputePipeline(const Context& ctx, std::span<const uint32_t> spirv, uint32_t push_bytes,
                                 const std::vector<uint32_t>& specialization)
    : device_(ctx.device()), push_bytes_(push_bytes), statistics_(ctx.traits().pipeline_statistics) {
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
    if (statistics_) info.flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
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

std::vector<PipelineStatistic> ComputePipeline::statistics() const {
  if (!statistics_) return {};
  // Extension commands: the loader does not export them.
  const auto properties = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(device_, "vkGetPipelineExecutablePropertiesKHR"));
  const auto statistics = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(device_, "vkGetPipelineExecutableStatisticsKHR"));
  if (!properties || !statistics) return {};
  const VkPipelineInfoKHR pipeline{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, nullptr, pipeline_};
  const auto executables = query_all<VkPipelineExecutablePropertiesKHR>(
      VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR,
      [&](uint32_t* n, VkPipelineExecutablePropertiesKHR* p) { return properties(device_, &pipeline, n, p); },
      "vkGetPipelineExecutablePropertiesKHR");
  std::vector<PipelineStatistic> out;
  for (uint32_t i = 0; i < executables.size(); ++i) {
    const VkPipelineExecutableInfoKHR executable{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, nullptr, pipeline_, i};
    const auto stats = query_all<VkPipelineExecutableStatisticKHR>(
        VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR,
        [&](uint32_t* n, VkPipelineExecutableStatisticKHR* p) { return statistics(device_, &executable, n, p); },
        "vkGetPipelineExecutableStatisticsKHR");
    for (const VkPipelineExecutableStatisticKHR& s : stats)
      out.push_back({executables[i].name, s.name, statistic_value(s)});
  }
  return out;
}

void ComputePipeline::dispatch(VkCommandBuffer cmd, const void* push, uint32_t groups) const {
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
  vkCmdPushConstants(cmd, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes_, push);
  vkCmdDispatch(cmd, groups, 1, 1);
}

}  // namespace spindle::vk
