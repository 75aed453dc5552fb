// The device's copy bandwidth: `spindle bench`'s ceiling for the Vulkan executor on a GPU,
// measured the way megakernel/copy_bandwidth.cpp measures CUDA's, by the device's own cores
// (shaders/copy.comp): vkCmdCopyBuffer ran at 851 GB/s on the H200, a fifth of what its SMs
// copy, so it would have made a floor the shader could beat.
#include <algorithm>
#include <limits>
#include <vector>

#include "host/vulkan_buffer.h"
#include "host/vulkan_context.h"
#include "host/vulkan_devices.h"
#include "host/vulkan_pipeline.h"
#include "shaders/spirv.h"
#include "tasks/error.h"

namespace spindle {
namespace {

constexpr int kWarmups = 2, kRuns = 7;
constexpr uint32_t kCopyWorkgroups = 4096;  // of 256 invocations, looping over the words

// copy.comp's push constants.
struct CopyPush {
  uint64_t src, dst;
  uint32_t words, pad;
};

// Two timestamp queries.
class TimestampPair {
 public:
  explicit TimestampPair(const vk::Context& ctx) : device_(ctx.device()) {
    VkQueryPoolCreateInfo info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = 2;
    vk::check(vkCreateQueryPool(device_, &info, nullptr, &pool_), "vkCreateQueryPool");
  }
  ~TimestampPair() { vkDestroyQueryPool(device_, pool_, nullptr); }
  TimestampPair(const TimestampPair&) = delete;
  TimestampPair& operator=(const TimestampPair&) = delete;

  void reset(VkCommandBuffer cmd) const { vkCmdResetQueryPool(cmd, pool_, 0, 2); }
  void write(VkCommandBuffer cmd, VkPipelineStageFlagBits stage, uint32_t i) const {
    vkCmdWriteTimestamp(cmd, stage, pool_, i);
  }
  // Ticks from the first to the second, once both are written, in the timestamps' width.
  uint64_t ticks(uint32_t valid_bits) const {
    uint64_t t[2] = {0, 0};
    vk::check(vkGetQueryPoolResults(device_, pool_, 0, 2, sizeof t, t, sizeof t[0],
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
              "vkGetQueryPoolResults");
    const uint64_t mask = valid_bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << valid_bits) - 1;
    return (t[1] - t[0]) & mask;
  }

 private:
  VkDevice device_;
  VkQueryPool pool_ = VK_NULL_HANDLE;
};

}  // namespace

double measure_vulkan_copy_bandwidth_gbs(int32_t device, uint64_t bytes) {
  if (bytes < 16) throw Error("vulkan copy bandwidth: the copy must have at least 16 bytes");
  bytes -= bytes % 16;
  vk::Context ctx(device);
  VkPhysicalDeviceVulkan11Properties v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &v11};
  vkGetPhysicalDeviceProperties2(ctx.physical(), &props);
  if (bytes > v11.maxMemoryAllocationSize)
    throw Error("vulkan copy bandwidth: a copy of " + std::to_string(bytes) + " bytes is more than " +
                ctx.traits().name + " allocates at once (" + std::to_string(v11.maxMemoryAllocationSize) +
                " bytes)");
  if (bytes / 16 > std::numeric_limits<uint32_t>::max())  // copy.comp counts words in 32 bits
    throw Error("vulkan copy bandwidth: a copy of " + std::to_string(bytes) + " bytes is more than 2^32 16-byte words");
  uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(ctx.physical(), &families, nullptr);
  std::vector<VkQueueFamilyProperties> family(families);
  vkGetPhysicalDeviceQueueFamilyProperties(ctx.physical(), &families, family.data());
  const uint32_t valid_bits = family[ctx.queue_family()].timestampValidBits;
  if (valid_bits == 0)
    throw Error("vulkan copy bandwidth: " + ctx.traits().name + " has no timestamps on its compute queue");

  vk::Buffer src(ctx, bytes, false, "the bandwidth probe's source");
  vk::Buffer dst(ctx, bytes, false, "the bandwidth probe's destination");
  vk::Commands commands(ctx);
  VkCommandBuffer cmd = commands.begin();
  vkCmdFillBuffer(cmd, src.get(), 0, VK_WHOLE_SIZE, 0x01010101u);  // not zeros: a copy of zeros can run faster
  vk::barrier(cmd);
  commands.submit_and_wait("filling the bandwidth probe's source");

  const vk::ComputePipeline copier(ctx, shaders::copy(), sizeof(CopyPush), {});
  const CopyPush push{src.address(), dst.address(), uint32_t(bytes / 16), 0};
  const TimestampPair stamps(ctx);
  std::vector<double> ns;
  for (int i = 0; i < kWarmups + kRuns; ++i) {
    cmd = commands.begin();
    stamps.reset(cmd);
    stamps.write(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0);
    copier.dispatch(cmd, &push, kCopyWorkgroups);
    stamps.write(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 1);
    commands.submit_and_wait("the bandwidth probe's copy");
    if (i >= kWarmups) ns.push_back(double(stamps.ticks(valid_bits)) * props.properties.limits.timestampPeriod);
  }
  std::nth_element(ns.begin(), ns.begin() + kRuns / 2, ns.end());
  const double median_ns = ns[kRuns / 2];
  if (!(median_ns > 0))
    throw Error("vulkan copy bandwidth: the timestamps of " + ctx.traits().name + " did not advance");
  return 2.0 * double(bytes) / median_ns;  // bytes per ns = GB/s
}

}  // namespace spindle
