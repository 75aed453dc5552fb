// The Vulkan executor's failures as messages naming the task, its opcode and step, like the
// CPU and CUDA executors' (so the same tests read them).
#pragma once
#include <cstdint>
#include <string>

#include "host/vulkan_records.h"
#include "tasks/graph.h"

namespace spindle::vk {

// A failure the shaders recorded in the control block.
std::string failure_message(const VulkanControl& c, const Graph& g);

// A wait that made no progress for watchdog_ms: the earliest task still waiting.
std::string watchdog_message(const Graph& g, uint32_t task, uint32_t step, uint32_t value, uint32_t watchdog_ms);

}  // namespace spindle::vk
