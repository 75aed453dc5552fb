// The Vulkan executor: the graph's steps as dispatches of one persistent compute shader
// (shaders/persistent.comp) whose workgroups claim tasks by ticket, wait on the counters and
// run the tiles, bit for bit what the CPU executors compute (docs/vulkan.md). A dispatch is
// bounded (lavapipe stops any invocation's loops after 65,535 back-edges), so the host
// re-dispatches until the counters say the steps are done, and reports a run that stops
// making progress. Greedy sampling only, as on CUDA.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "host/executor.h"

namespace spindle {

// How a worker polls a counter (shaders/protocol.glsl).
enum class VulkanPoll {
  Device,     // Load on GPUs, AtomicAdd on CPU devices
  AtomicAdd,  // an atomic add of 0 (lavapipe once hoisted an atomic load out of the loop)
  Load,       // a relaxed atomic load
};

// Research knobs of the persistent shader.
struct VulkanTuning {
  uint32_t warps = 0;          // logical warps (32 invocations) per workgroup; 0 = 1 on lavapipe, else 8
  uint32_t budget = 0;         // loop back-edges one invocation may take per dispatch; 0 = the device's
  uint32_t shuffle_width = 0;  // butterfly levels below it use subgroup shuffles (a power of two at most
                               // the subgroup size, 1 = none); 0 = the subgroup size, at most 32
  VulkanPoll poll = VulkanPoll::Device;
};

class VulkanExecutor final : public Executor {
 public:
  // Throws spindle::Error when no usable device is found, the graph needs what the shaders
  // lack, or memory runs out (naming the buffer and the bytes).
  VulkanExecutor(const Graph& g, const ModelWeights& w, const ExecutorOptions& opt, const VulkanTuning& tuning = {});
  ~VulkanExecutor() override;

  // Uploads the STATE arena, dispatches until the steps are done, reads STATE and the logits
  // back. Throws spindle::Error when the state asks for temperature > 0, on a device failure
  // (token or position out of range) and when no task finishes for watchdog_ms; the executor
  // then refuses to run again.
  void run_steps(uint32_t steps) override;
  std::string describe() const override;
  std::span<const float> logits() const override;
  uint32_t worker_count() const override { return workers_; }

  // Dispatches the last run_steps took.
  uint32_t last_run_dispatches() const { return last_run_dispatches_; }

 private:
  struct Device;
  void run_chunk(uint32_t steps);
  // The run's records, its start `run_ns` after the first traced run's, its shader clock then.
  void read_trace(uint32_t steps, uint64_t run_ns, uint64_t run_clock);

  ExecutorOptions opt_;
  std::unique_ptr<Device> dev_;
  uint32_t workers_ = 0, warps_ = 0, shuffle_width_ = 0;
  bool poll_by_load_ = false;
  std::vector<float> logits_;
  uint32_t last_run_dispatches_ = 0;
  std::optional<std::chrono::steady_clock::time_point> trace_epoch_;  // the first traced run's start
  bool broken_ = false;
};

}  // namespace spindle
