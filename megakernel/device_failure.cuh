// Failures on the device: the first one is recorded in the run's control block and raises the
// abort flag, which every waiter checks; the host reports it after the launch.
#pragma once
#include <stdint.h>

#include "megakernel/device_atomic.cuh"
#include "megakernel/device_records.h"
#include "megakernel/ptx.cuh"

namespace spindle::cuda {

// The task a tile is running, for its failure record.
struct TaskSite {
  RunControl* control;
  uint32_t task, step;
};

// Called by one thread. Later failures (often consequences of the first) are dropped.
__device__ inline void report_failure(RunControl* control, const DeviceFailure& f) {
  if (atomicCAS(&control->failure.kind, uint32_t(kFailNone), f.kind) == kFailNone) {
    control->failure.task = f.task;
    control->failure.step = f.step;
    control->failure.counter = f.counter;
    control->failure.value = f.value;
    control->failure.target = f.target;
  }
  __threadfence();
  DeviceAtomic(control->abort).store(1u, kRelaxed);
}

// A tile's operand is out of range: thread 0 records it; the caller skips the tile's writes.
// `where` goes in the record's counter word (DeviceFailureKind says when one is).
__device__ inline void fail_task(const TaskSite& site, DeviceFailureKind kind, uint32_t value, uint32_t limit,
                                 uint32_t where = SP_NO_COUNTER) {
  if (threadIdx.x == 0) report_failure(site.control, {uint32_t(kind), site.task, site.step, where, value, limit});
}

__device__ inline bool run_aborted(RunControl* control) {
  return DeviceAtomic(control->abort).load(kRelaxed) != 0;
}

}  // namespace spindle::cuda
