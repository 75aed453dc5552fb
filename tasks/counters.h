// Monotonic counters. They are never reset: a stage signalled by `count` tasks per step
// reaches count*(step+1) when step `step` is done. Comparison is wrap-around safe.
#pragma once
#include <stdint.h>

#include "tasks/host_device.h"
#include "tasks/task.h"

// Value the counter must reach before `task` may run in step `step`.
SP_HD inline uint32_t sp_wait_target(const SpTask& t, uint32_t step) {
  return t.wait_count * (t.wait_mode == SP_WAIT_PREV_STEP ? step : step + 1u);
}

// True when `value` has reached `target` (modulo 2^32, within half the range).
SP_HD inline bool sp_counter_reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}
