// Device memory for the Vulkan executor: storage buffers the shaders reach by their device
// address, a host-visible staging buffer, and one command buffer for work on the queue.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>

#include "host/vulkan_context.h"

namespace spindle::vk {

class Buffer {
 public:
  Buffer() = default;
  // A storage buffer with a device address, in device-local memory, or host-visible coherent
  // memory (mapped) when host_visible. Throws spindle::Error naming `what` and the bytes when
  // the memory cannot be had.
  Buffer(const Context& ctx, VkDeviceSize bytes, bool host_visible, const std::string& what);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;

  VkBuffer get() const { return buffer_; }
  VkDeviceSize bytes() const { return bytes_; }
  uint64_t address() const { return address_; }
  uint8_t* mapped() const { return mapped_; }  // host-visible buffers only

 private:
  void release();
  VkDevice device_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize bytes_ = 0;
  uint64_t address_ = 0;
  uint8_t* mapped_ = nullptr;
};

// One primary command buffer, recorded and submitted again and again, with its fence.
class Commands {
 public:
  explicit Commands(const Context& ctx);
  ~Commands();
  Commands(const Commands&) = delete;
  Commands& operator=(const Commands&) = delete;

  VkCommandBuffer begin();
  // Ends the recording, submits it and waits; `what` names it in an error.
  void submit_and_wait(const char* what);

 private:
  const Context& ctx_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

// Makes every earlier write of the command buffer visible to every later command and, after
// the submission's fence, to the host.
void barrier(VkCommandBuffer cmd);

void copy(VkCommandBuffer cmd, const Buffer& src, VkDeviceSize src_offset, const Buffer& dst, VkDeviceSize dst_offset,
          VkDeviceSize bytes);

}  // namespace spindle::vk
