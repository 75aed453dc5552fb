#include "megakernel/failure_message.h"

#include "tasks/gang.h"

namespace spindle::cuda {

std::string failure_message(const DeviceFailure& f, const Graph& g, uint32_t watchdog_ms) {
  const char* op = f.task < g.tasks.size() ? sp_opcode_name(g.tasks[f.task].op) : nullptr;
  const std::string task = "task " + std::to_string(f.task) + " (" + (op ? op : "?") + ") of step " + std::to_string(f.step);
  const std::string value = std::to_string(f.value), target = std::to_string(f.target);
  switch (f.kind) {
    case kFailWatchdog: {
      const std::string waited = "cuda executor watchdog: " + task + " waited over " + std::to_string(watchdog_ms) + " ms ";
      // The cluster program's waits inside a block or its cluster have no graph counter.
      if (f.counter == SP_NO_COUNTER)
        return waited + "inside its block or cluster, on no graph counter: for weights to land in shared memory, or "
                        "for its cluster's blocks at a cluster barrier";
      const std::string counter = f.counter < g.counter_names.size() ? g.counter_names[f.counter] : "?";
      return waited + "on counter " + std::to_string(f.counter) + " (" + counter + "): value " + value + ", needs " + target;
    }
    case kFailGangWatchdog: {
      const uint32_t width = f.task < g.tasks.size() ? sp_gang_width(g.tasks[f.task]) : 0u;
      return "cuda executor watchdog: " + task + ", rank " + std::to_string(f.counter) + " of a gang of " +
             std::to_string(width) + ", waited over " + std::to_string(watchdog_ms) +
             " ms at its gang's barrier for a member that never arrived: barrier word " + value + ", needs " + target;
    }
    case kFailTokenRange:
      return "cuda executor: " + task + ": token " + value + " is not below the embedding's " + target + " rows";
    case kFailPositionRange:
      return "cuda executor: " + task + ": position " + value + " is past the KV capacity of " + target;
    case kFailStepRange:
      return "cuda executor: " + task + ": step " + value + " is past the " + target + " out-token slots";
    case kFailExpertRange:
      return "cuda executor: " + task + ": routing slot " + std::to_string(f.counter) + " names expert " + value +
             ", not one of the " + target + " (does an expert_gate_up task write the routing?)";
  }
  return "cuda executor: " + task + ": unknown device failure " + std::to_string(f.kind);
}

}  // namespace spindle::cuda
