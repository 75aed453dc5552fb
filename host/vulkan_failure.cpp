#include "host/vulkan_failure.h"

#include "tasks/counters.h"

namespace spindle::vk {
namespace {

std::string task_name(const Graph& g, uint32_t task, uint32_t step) {
  const char* op = task < g.tasks.size() ? sp_opcode_name(g.tasks[task].op) : nullptr;
  return "task " + std::to_string(task) + " (" + (op ? op : "?") + ") of step " + std::to_string(step);
}

}  // namespace

std::string failure_message(const VulkanControl& c, const Graph& g) {
  const std::string task = "vulkan executor: " + task_name(g, c.failure_task, c.failure_step);
  const std::string value = std::to_string(c.failure_value), target = std::to_string(c.failure_target);
  switch (c.failure_kind) {
    case kVkFailTokenRange: return task + ": token " + value + " is not below the embedding's " + target + " rows";
    case kVkFailPositionRange: return task + ": position " + value + " is past the KV capacity of " + target;
    case kVkFailStepRange: return task + ": step " + value + " is past the " + target + " out-token slots";
    case kVkFailTaskTooLong:
      return task + ": its tile needs up to " + value + " loop iterations, more than one dispatch may take on this "
             "device (" + target + "); split it into smaller tasks";
    case kVkFailExpertRange:
      return task + ": routing slot " + std::to_string(c.failure_slot) + " names expert " + value + ", not one of the " +
             target + " (does an expert_gate_up task write the routing?)";
  }
  return task + ": unknown device failure " + std::to_string(c.failure_kind);
}

std::string watchdog_message(const Graph& g, uint32_t task, uint32_t step, uint32_t value, uint32_t watchdog_ms) {
  const SpTask& t = g.tasks.at(task);
  const std::string counter = t.wait_counter < g.counter_names.size() ? g.counter_names[t.wait_counter] : "?";
  return "vulkan executor watchdog: " + task_name(g, task, step) + " waited over " + std::to_string(watchdog_ms) +
         " ms on counter " + std::to_string(t.wait_counter) + " (" + counter + "): value " + std::to_string(value) +
         ", needs " + std::to_string(sp_wait_target(t, step));
}

}  // namespace spindle::vk
