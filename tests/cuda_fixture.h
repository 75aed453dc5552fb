// Options of the CUDA executor that its tests share: a watchdog that fails a hang in seconds.
#pragma once
#include "host/executor.h"

inline spindle::ExecutorOptions cuda_options(spindle::CudaMode mode,
                                             spindle::ScheduleKind schedule = spindle::ScheduleKind::Ticket,
                                             uint32_t workers = 0, const spindle::MegakernelTuning& tuning = {}) {
  spindle::ExecutorOptions o;
  o.megakernel = tuning;
  o.kind = spindle::ExecutorKind::Cuda;
  o.cuda_mode = mode;
  o.schedule = schedule;
  o.workers = workers;
  o.watchdog_ms = 10000;
  return o;
}
