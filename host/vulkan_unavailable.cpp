// Stands in for the Vulkan executor in a build configured without Vulkan (no headers or
// loader, or no glslc): every entry point says so.
#include "host/vulkan_devices.h"
#include "tasks/error.h"

namespace spindle {
namespace {

[[noreturn]] void no_vulkan() {
  throw Error("this build has no Vulkan executor: the Vulkan headers and loader (libvulkan-dev) or glslc were not "
              "found when it was configured");
}

}  // namespace

std::vector<VulkanDeviceInfo> list_vulkan_devices() { no_vulkan(); }

VulkanDeviceInfo chosen_vulkan_device(int32_t) { no_vulkan(); }

double measure_vulkan_copy_bandwidth_gbs(int32_t, uint64_t) { no_vulkan(); }

std::unique_ptr<Executor> make_vulkan_executor(const Graph&, const ModelWeights&, const ExecutorOptions&) {
  no_vulkan();
}

}  // namespace spindle
