// What the Vulkan tests share: executor options with a watchdog that fails a hang in seconds,
// and lavapipe run with two threads, so that workgroups really run at once (its default on
// the machines measured runs them one after another) and the protocol's races are exercised.
#pragma once
#include <cstdlib>

#include "host/executor.h"

inline const bool kLavapipeThreads = (setenv("LP_NUM_THREADS", "2", 0), true);

inline spindle::ExecutorOptions vulkan_options(uint32_t workers = 0, uint32_t watchdog_ms = 10000) {
  spindle::ExecutorOptions o;
  o.kind = spindle::ExecutorKind::Vulkan;
  o.workers = workers;
  o.watchdog_ms = watchdog_ms;
  return o;
}

inline spindle::ExecutorOptions vulkan_options(uint32_t workers, const spindle::VulkanTuning& tuning) {
  spindle::ExecutorOptions o = vulkan_options(workers);
  o.vulkan = tuning;
  return o;
}
