// The words for a failure the kernels recorded: the task by index and opcode, the step, and
// for the watchdog the counter by name with its value and target (or, for the cluster program's
// waits inside a block or cluster, what such a wait is for).
#pragma once
#include <cstdint>
#include <string>

#include "megakernel/device_records.h"
#include "tasks/graph.h"

namespace spindle::cuda {

std::string failure_message(const DeviceFailure& f, const Graph& g, uint32_t watchdog_ms);

}  // namespace spindle::cuda
