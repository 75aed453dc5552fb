// What the Vulkan tests share: executor options with a watchdog that fails a hang in seconds,
// and lavapipe run with two threads, so that workgroups really run at once (its default on
// the machines measured runs them one after another) and the protocol's races are exercised.
#pragma once
#include <cstdlib>
#include <string>

#include "host/executor.h"
#include "host/vulkan_devices.h"

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

// Whether the tests run on lavapipe, CI's device. There LLVM takes 20-50 s to compile each
// distinct pipeline and a workgroup of 8 warps runs a step ~7x slower than one of 1, so the
// cases run 8 warps or more on GPUs only, but for one run of the tiny case.
inline bool on_lavapipe() {
  static const bool lavapipe = spindle::chosen_vulkan_device(-1).name.find("llvmpipe") != std::string::npos;
  return lavapipe;
}
