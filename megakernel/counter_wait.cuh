// Thread 0's wait for a counter (a task's, or a gang's barrier) to reach a target, backing off
// with __nanosleep, checking the abort flag, and timing out at the watchdog's bound.
#pragma once
#include <stdint.h>

#include "megakernel/device_atomic.cuh"
#include "megakernel/device_failure.cuh"
#include "megakernel/device_records.h"
#include "tasks/counters.h"

namespace spindle::cuda {

// After a first acquire load of `word` that gave `value` short of `target`: polls (acquire)
// until it reaches it (true; `value` is the last value loaded). False when the run was aborted,
// or when the wait outlived the watchdog, which then reports `timeout` with that value. The
// loop keeps the form the task wait had before it was shared: returning a status for the
// caller to act on made qwen3-0.6b's megakernel 0.2% slower (docs/EXPERIMENTS.md).
__device__ inline bool poll_until(uint32_t& word, uint32_t target, uint32_t& value, const Backoff& b,
                                  RunControl* control, DeviceFailure timeout) {
  DeviceAtomic counter(word);
  const uint64_t start = global_timer_ns();
  for (uint32_t sleep_ns = b.first_sleep_ns;; sleep_ns = min(2 * sleep_ns + 1, b.max_sleep_ns)) {
    __nanosleep(sleep_ns);
    value = counter.load(kAcquire);
    if (sp_counter_reached(value, target)) return true;
    if (run_aborted(control)) return false;
    if (global_timer_ns() - start > b.watchdog_ns) {
      timeout.value = value;
      report_failure(control, timeout);
      return false;
    }
  }
}

}  // namespace spindle::cuda
