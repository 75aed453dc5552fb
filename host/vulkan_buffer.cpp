#include "host/vulkan_buffer.h"

#include <utility>

#include "tasks/error.h"

namespace spindle::vk {
namespace {

// The first memory type allowed by `bits` with all of `flags`, or UINT32_MAX.
uint32_t memory_type(VkPhysicalDevice physical, uint32_t bits, VkMemoryPropertyFlags flags) {
  VkPhysicalDeviceMemoryProperties props;
  vkGetPhysicalDeviceMemoryProperties(physical, &props);
  for (uint32_t i = 0; i < props.memoryTypeCount; ++i)
    if ((bits & (1u << i)) && (props.memoryTypes[i].propertyFlags & flags) == flags) return i;
  return UINT32_MAX;
}

}  // namespace

Buffer::Buffer(const Context& ctx, VkDeviceSize bytes, bool host_visible, const std::string& what)
    : device_(ctx.device()), bytes_(bytes) {
  const std::string where = " for " + what + " (" + std::to_string(bytes) + " bytes)";
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = bytes ? bytes : 4;  // Vulkan has no empty buffers
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
               VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device_, &info, nullptr, &buffer_), ("vkCreateBuffer" + where).c_str());
  try {
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, buffer_, &req);
    const VkMemoryPropertyFlags flags = host_visible
        ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    uint32_t type = memory_type(ctx.physical(), req.memoryTypeBits, flags);
    if (type == UINT32_MAX && !host_visible) type = memory_type(ctx.physical(), req.memoryTypeBits, 0);
    if (type == UINT32_MAX) throw Error("vulkan: no memory type fits the buffer" + where);
    VkMemoryAllocateFlagsInfo address{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    address.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, &address};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = type;
    check(vkAllocateMemory(device_, &alloc, nullptr, &memory_), ("vkAllocateMemory" + where).c_str());
    check(vkBindBufferMemory(device_, buffer_, memory_, 0), ("vkBindBufferMemory" + where).c_str());
    if (host_visible) {
      void* p = nullptr;
      check(vkMapMemory(device_, memory_, 0, VK_WHOLE_SIZE, 0, &p), ("vkMapMemory" + where).c_str());
      mapped_ = static_cast<uint8_t*>(p);
    }
    VkBufferDeviceAddressInfo at{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    at.buffer = buffer_;
    address_ = vkGetBufferDeviceAddress(device_, &at);
  } catch (...) {
    release();
    throw;
  }
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::exchange(other.device_, VK_NULL_HANDLE);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    bytes_ = std::exchange(other.bytes_, 0);
    address_ = std::exchange(other.address_, 0);
    mapped_ = std::exchange(other.mapped_, nullptr);
  }
  return *this;
}

void Buffer::release() {
  if (buffer_) vkDestroyBuffer(device_, buffer_, nullptr);
  if (memory_) vkFreeMemory(device_, memory_, nullptr);  // unmaps too
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
}

Commands::Commands(const Context& ctx) : ctx_(ctx) {
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = ctx.queue_family();
  check(vkCreateCommandPool(ctx.device(), &pool, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  try {
    check(vkAllocateCommandBuffers(ctx.device(), &alloc, &cmd_), "vkAllocateCommandBuffers");
    check(vkCreateFence(ctx.device(), &fence, nullptr, &fence_), "vkCreateFence");
  } catch (...) {
    vkDestroyCommandPool(ctx.device(), pool_, nullptr);
    throw;
  }
}

Commands::~Commands() {
  vkDestroyFence(ctx_.device(), fence_, nullptr);
  vkDestroyCommandPool(ctx_.device(), pool_, nullptr);  // frees the command buffer
}

VkCommandBuffer Commands::begin() {
  check(vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  info.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(cmd_, &info), "vkBeginCommandBuffer");
  return cmd_;
}

void Commands::submit_and_wait(const char* what) {
  check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd_;
  check(vkResetFences(ctx_.device(), 1, &fence_), "vkResetFences");
  check(vkQueueSubmit(ctx_.queue(), 1, &submit, fence_), (std::string("vkQueueSubmit (") + what + ")").c_str());
  check(vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX),
        (std::string("vkWaitForFences (") + what + ")").c_str());
}

void barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                       0, 1, &b, 0, nullptr, 0, nullptr);
}

void copy(VkCommandBuffer cmd, const Buffer& src, VkDeviceSize src_offset, const Buffer& dst, VkDeviceSize dst_offset,
          VkDeviceSize bytes) {
  if (bytes == 0) return;
  const VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(cmd, src.get(), dst.get(), 1, &region);
}

}  // namespace spindle::vk
