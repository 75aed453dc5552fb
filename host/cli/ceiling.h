// What bench and trace export hold a run against: the bandwidth ceiling, the copy bandwidth of
// the memory the executor reads measured in the same run, and the median of repeated timings.
#pragma once
#include <string>
#include <vector>

#include "host/executor.h"

namespace spindle::cli {

double median(std::vector<double> v);

struct Ceiling {
  double gbs;        // bytes read and written per second, GB/s
  std::string what;  // "device-to-device copy" or "host memcpy"
};

// The GPU's copy bandwidth for CUDA and for Vulkan on a GPU device, else the host's memcpy.
// Vulkan and the host copy at most 1 GiB (a Vulkan allocation may not hold 4).
Ceiling measure_ceiling(const ExecutorOptions& o, double copy_gib);

}  // namespace spindle::cli
